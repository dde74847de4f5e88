package ec2query

import (
	"encoding/xml"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestDecodeFlattenedLists(t *testing.T) {
	body := "Action=DescribeNetworkInterfaces&Version=2016-11-15" +
		"&Filter.1.Name=tag%3Acluster&Filter.1.Value.1=a&Filter.1.Value.2=b" +
		"&Filter.2.Name=status&Filter.2.Value.1=available" +
		"&TagSpecification.1.ResourceType=network-interface&TagSpecification.1.Tag.1.Key=k&TagSpecification.1.Tag.1.Value=v" +
		"&NetworkInterfaceId.2=eni-2&NetworkInterfaceId.1=eni-1&NetworkInterfaceId.10=eni-10"
	req, err := DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if req.Action != "DescribeNetworkInterfaces" || req.Version != "2016-11-15" {
		t.Fatalf("action/version = %q/%q", req.Action, req.Version)
	}
	ids, err := req.Params.StringList("NetworkInterfaceId")
	if err != nil || !slices.Equal(ids, []string{"eni-1", "eni-2", "eni-10"}) {
		t.Fatalf("ids = %v, %v; want numeric order", ids, err)
	}
	filters := req.Params.List("Filter")
	if len(filters) != 2 {
		t.Fatalf("%d filters", len(filters))
	}
	name, _ := filters[0].String("Name")
	vals, _ := filters[0].StringList("Value")
	if name != "tag:cluster" || !slices.Equal(vals, []string{"a", "b"}) {
		t.Fatalf("filter 1 = %q %v", name, vals)
	}
	if u := req.Unused(); !slices.Equal(u, []string{"Filter.2.Name", "Filter.2.Value.1",
		"TagSpecification.1.ResourceType", "TagSpecification.1.Tag.1.Key", "TagSpecification.1.Tag.1.Value"}) {
		t.Fatalf("unused = %v", u)
	}
	ts := req.Params.List("TagSpecification")[0]
	tag := ts.List("Tag")[0]
	k, _ := tag.String("Key")
	v, _ := tag.String("Value")
	rt, _ := ts.String("ResourceType")
	if k != "k" || v != "v" || rt != "network-interface" {
		t.Fatalf("tag spec = %q %q %q", rt, k, v)
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		body, code string
	}{
		{"Action=X&%zz", CodeMalformedQueryString},
		{"Version=2016-11-15", CodeMissingAction},
		{"Action=X&A..B=1", CodeMalformedQueryString},
		{"Action=X&A=1&A=2", CodeMalformedQueryString},
		{"Action=X&" + strings.Repeat("a.", 20) + "b=1", CodeMalformedQueryString},
	}
	for _, c := range cases {
		_, err := DecodeRequest([]byte(c.body))
		var e *Error
		if !errors.As(err, &e) || e.Code != c.code || e.Status != http.StatusBadRequest {
			t.Errorf("%q: err = %v, want %s/400", c.body, err, c.code)
		}
	}
}

func TestTypedAccessors(t *testing.T) {
	req, err := DecodeRequest([]byte("Action=X&N=12&B=TRUE&Bad=x1&BadB=yes"))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok, err := req.Params.Int("N"); n != 12 || !ok || err != nil {
		t.Errorf("Int = %d %v %v", n, ok, err)
	}
	if b, ok, err := req.Params.Bool("B"); !b || !ok || err != nil {
		t.Errorf("Bool = %v %v %v", b, ok, err)
	}
	if _, _, err := req.Params.Int("Bad"); err == nil || err.(*Error).Code != CodeInvalidParameterValue {
		t.Errorf("Int(bad) err = %v", err)
	}
	if _, _, err := req.Params.Bool("BadB"); err == nil {
		t.Error("Bool(yes) accepted")
	}
	if _, err := req.Params.Required("Missing"); err == nil || err.(*Error).Code != CodeMissingParameter {
		t.Errorf("Required err = %v", err)
	}
	if err := req.CheckUnused(); err != nil {
		t.Errorf("CheckUnused = %v; every parameter was read", err)
	}
}

func TestErrorBodyShape(t *testing.T) {
	b := MarshalError("req-1", Errorf("InvalidNetworkInterfaceID.NotFound", "The networkInterface ID '%s' does not exist", "eni-1"))
	var got struct {
		Code      string `xml:"Errors>Error>Code"`
		Message   string `xml:"Errors>Error>Message"`
		RequestID string `xml:"RequestID"`
	}
	if err := xml.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Code != "InvalidNetworkInterfaceID.NotFound" || got.Message != "The networkInterface ID 'eni-1' does not exist" || got.RequestID != "req-1" {
		t.Fatalf("decoded %+v from %s", got, b)
	}
}

func TestMarshalResponseItems(t *testing.T) {
	type tag struct {
		Key   string `xml:"key"`
		Value string `xml:"value"`
	}
	type body struct {
		Meta
		Tags []tag `xml:"tagSet>item"`
		Ret  bool  `xml:"return"`
	}
	b, err := MarshalResponse("CreateTags", "r1", &body{Tags: []tag{{"a", "b"}}, Ret: true})
	if err != nil {
		t.Fatal(err)
	}
	want := `<CreateTagsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r1</requestId><tagSet><item><key>a</key><value>b</value></item></tagSet><return>true</return></CreateTagsResponse>`
	if !strings.HasSuffix(string(b), want) {
		t.Fatalf("got %s", b)
	}
}
