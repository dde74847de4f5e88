package ec2query

import (
	"encoding/xml"
	"errors"
	"net/url"
	"slices"
	"testing"
)

// FuzzDecodeRequest feeds arbitrary bodies to the decoder: it must never
// panic, every refusal must be a 4xx EC2 error whose body the SDK can parse,
// and every accepted parameter must be reported unused until read.
func FuzzDecodeRequest(f *testing.F) {
	seeds := []string{
		"Action=CreateNetworkInterface&Version=2016-11-15&SubnetId=subnet-1&SecondaryPrivateIpAddressCount=3",
		"Action=DescribeNetworkInterfaces&Filter.1.Name=tag%3Ak&Filter.1.Value.1=v&MaxResults=5",
		"Action=CreateTags&ResourceId.1=eni-1&Tag.1.Key=a&Tag.1.Value=b",
		"Action=X&TagSpecification.1.Tag.1.Key=k&PrivateIpAddresses.1.PrivateIpAddress=10.0.0.5",
		"Action=%zz",
		"A..B=1&Action=X",
		"Action=X&a=1&a=2",
		"",
		"Action=X&Filter.01.Name=x&Filter.-1.Name=y&Filter.0.Name=z",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if e.Status < 400 || e.Status > 499 || e.Code == "" {
				t.Fatalf("error %+v: want a 4xx with a code", e)
			}
			var parsed struct {
				Code string `xml:"Errors>Error>Code"`
			}
			if err := xml.Unmarshal(MarshalError("r", e), &parsed); err != nil || parsed.Code != e.Code {
				t.Fatalf("error body does not round-trip: %v %q", err, parsed.Code)
			}
			return
		}
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			t.Fatalf("decoder accepted what url.ParseQuery refuses: %v", err)
		}
		var want []string
		for k := range vals {
			if k != "Action" && k != "Version" {
				want = append(want, k)
			}
		}
		slices.Sort(want)
		if got := req.Unused(); !slices.Equal(got, want) {
			t.Fatalf("Unused() = %q, want %q", got, want)
		}
		// Reading every top-level parameter in every way must not panic.
		for _, k := range want {
			_, _ = req.Params.StringList(k)
			_, _, _ = req.Params.Int(k)
			_, _, _ = req.Params.Bool(k)
			for _, m := range req.Params.List(k) {
				_, _ = m.String("Name")
				_, _ = m.StringList("Value")
			}
		}
		_ = req.CheckUnused()
	})
}
