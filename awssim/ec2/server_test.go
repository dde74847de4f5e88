package ec2

import (
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim/ec2query"
	"github.com/allotnet/allot/awssim/simclock"
	"github.com/allotnet/allot/awssim/throttle"
	"github.com/allotnet/allot/awssim/world"
)

func newTestServer(t *testing.T) *Server {
	t.Helper()
	clk := simclock.NewManual(time.Unix(1700000000, 0))
	w := world.New(world.Config{Clock: clk})
	return New(Config{World: w, Limiter: throttle.New(clk, nil)})
}

func post(s *Server, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	s.ServeHTTP(rec, req)
	return rec
}

// TestHandlerPanicIsInternalError: a handler bug answers 500 InternalError
// and the server keeps serving.
func TestHandlerPanicIsInternalError(t *testing.T) {
	s := newTestServer(t)
	handlers["PanicForTest"] = func(*Server, *ec2query.Request) (ec2query.Body, error) { panic("boom") }
	defer delete(handlers, "PanicForTest")
	rec := post(s, "Action=PanicForTest")
	var e struct {
		Code string `xml:"Errors>Error>Code"`
	}
	if err := xml.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != 500 || e.Code != "InternalError" {
		t.Fatalf("panic answered %d %q (%v)", rec.Code, rec.Body.String(), err)
	}
	if c := s.Counters()["PanicForTest"]; c.Calls != 1 || c.Errors != 1 {
		t.Fatalf("counters %+v", c)
	}
	if rec := post(s, "Action=DescribeSubnets"); rec.Code != 200 {
		t.Fatalf("after panic: %d", rec.Code)
	}
}

// TestResponseEnvelope checks the raw XML shape the SDK relies on: the
// <ActionResponse> root in EC2's namespace, requestId, <item> members.
func TestResponseEnvelope(t *testing.T) {
	s := newTestServer(t)
	rec := post(s, "Action=DescribeInstanceTypes&Version=2016-11-15&InstanceType.1=m5.large")
	body := rec.Body.String()
	for _, want := range []string{
		`<DescribeInstanceTypesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">`,
		`<requestId>`, `<instanceTypeSet><item><instanceType>m5.large</instanceType>`,
		`<maximumNetworkInterfaces>3</maximumNetworkInterfaces>`, `<ipv4AddressesPerInterface>10</ipv4AddressesPerInterface>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("response lacks %s:\n%s", want, body)
		}
	}
	if rec.Header().Get("Content-Type") != "text/xml;charset=UTF-8" {
		t.Errorf("content type %q", rec.Header().Get("Content-Type"))
	}
}
