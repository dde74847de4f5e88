package cniwire_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/allotnet/allot/agent/cniserver/cniwire"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// TestMessagesMatchTheGeneratedTypes: what the plugin encodes by hand is
// what the agent decodes with the generated types, field by field, and the
// other way round.
func TestMessagesMatchTheGeneratedTypes(t *testing.T) {
	req := cniwire.CNIRequest{
		Attachment: cniwire.Attachment{Network: "allot", ContainerID: "c0ffee", IfName: "eth0"},
		NetNS:      "/var/run/netns/cni-1", CNIVersion: "1.1.0", PodNamespace: "default", PodName: "web-0",
		PrevResult: []byte(`{"cniVersion":"1.1.0"}`),
	}
	got := &allotv1.CNIRequest{}
	if err := proto.Unmarshal(req.Marshal(), got); err != nil {
		t.Fatal(err)
	}
	want := &allotv1.CNIRequest{
		Attachment: &allotv1.Attachment{Network: "allot", ContainerId: "c0ffee", Ifname: "eth0"},
		Netns:      "/var/run/netns/cni-1", CniVersion: "1.1.0", PodNamespace: "default", PodName: "web-0",
		PrevResult: []byte(`{"cniVersion":"1.1.0"}`),
	}
	if !proto.Equal(got, want) {
		t.Errorf("CNIRequest decodes as %v, want %v", got, want)
	}

	gc := cniwire.GCRequest{Network: "allot", Valid: []cniwire.Attachment{
		{Network: "allot", ContainerID: "a", IfName: "eth0"}, {Network: "allot", ContainerID: "b", IfName: "net1"}}}
	gotGC := &allotv1.CNIGCRequest{}
	if err := proto.Unmarshal(gc.Marshal(), gotGC); err != nil {
		t.Fatal(err)
	}
	wantGC := &allotv1.CNIGCRequest{Network: "allot", Valid: []*allotv1.Attachment{
		{Network: "allot", ContainerId: "a", Ifname: "eth0"}, {Network: "allot", ContainerId: "b", Ifname: "net1"}}}
	if !proto.Equal(gotGC, wantGC) {
		t.Errorf("CNIGCRequest decodes as %v, want %v", gotGC, wantGC)
	}

	res := &allotv1.CNIAddResult{Address: "10.0.1.7/32", Gateway: "169.254.1.1", HostIfname: "allot1a2b3c4d5e6",
		HostMac: "02:00:00:00:00:01", ContainerMac: "02:00:00:00:00:02", EniId: "eni-0123456789abcdef0"}
	b, err := proto.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	ar, err := cniwire.UnmarshalAddResult(b)
	wantAR := cniwire.AddResult{Address: "10.0.1.7/32", Gateway: "169.254.1.1", HostIfName: "allot1a2b3c4d5e6",
		HostMAC: "02:00:00:00:00:01", ContainerMAC: "02:00:00:00:00:02", ENIID: "eni-0123456789abcdef0"}
	if err != nil || ar != wantAR {
		t.Errorf("CNIAddResult decodes as %+v (%v), want %+v", ar, err, wantAR)
	}
	if _, err := cniwire.UnmarshalAddResult([]byte{0x0a, 0x05, 'x'}); err == nil {
		t.Error("a truncated add result decodes without error")
	}
}

// TestEnvelopes: requests and responses survive the frame, and bad frames
// are errors, never a crash or an unbounded allocation.
func TestEnvelopes(t *testing.T) {
	req := cniwire.Request{Method: cniwire.MethodDel, Timeout: 10 * time.Second,
		Headers: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		Body:    []byte("body")}
	p, err := cniwire.ReadFrame(bytes.NewReader(cniwire.AppendRequest(nil, req)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := cniwire.ParseRequest(p)
	if err != nil || got.Method != req.Method || got.Timeout != req.Timeout ||
		got.Headers["traceparent"] != req.Headers["traceparent"] || string(got.Body) != "body" {
		t.Errorf("request round trip: %+v (%v), want %+v", got, err, req)
	}
	for _, r := range []cniwire.Response{{Body: []byte("ok")}, {Code: cniwire.ResourceExhausted, Message: "pool empty"}} {
		p, err := cniwire.ReadFrame(bytes.NewReader(cniwire.AppendResponse(nil, r)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := cniwire.ParseResponse(p)
		if err != nil || got.Code != r.Code || got.Message != r.Message || string(got.Body) != string(r.Body) {
			t.Errorf("response round trip: %+v (%v), want %+v", got, err, r)
		}
	}
	if _, err := cniwire.ReadFrame(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff})); !errors.Is(err, cniwire.ErrFrameTooLarge) {
		t.Errorf("a 4 GiB frame header: %v, want ErrFrameTooLarge", err)
	}
	if _, err := cniwire.ReadFrame(bytes.NewReader([]byte{0, 0, 0, 9, 1})); err == nil {
		t.Error("a short frame reads without error")
	}
	for _, bad := range [][]byte{{0x08}, {0x22, 0x09, 0x01}, {0xff}} {
		if _, err := cniwire.ParseRequest(bad); err == nil {
			t.Errorf("request %x parses", bad)
		}
		if _, err := cniwire.ParseResponse(bad); err == nil {
			t.Errorf("response %x parses", bad)
		}
	}
}
