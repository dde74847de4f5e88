package awssim_test

import (
	"encoding/xml"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMalformedRequests sends raw bodies the SDK would never send and
// checks each gets the EC2 error body with the right status and code.
func TestMalformedRequests(t *testing.T) {
	h := startDefault(t)
	cases := []struct {
		name, method, body string
		status             int
		code               string
	}{
		{"bad form encoding", "POST", "Action=DescribeSubnets&Version=2016-11-15&%zz", 400, "MalformedQueryString"},
		{"no action", "POST", "Version=2016-11-15", 400, "MissingAction"},
		{"unknown action", "POST", "Action=RunInstances&Version=2016-11-15", 400, "InvalidAction"},
		{"unknown parameter", "POST", "Action=DescribeSubnets&Version=2016-11-15&Colour=red", 400, "UnknownParameter"},
		{"unknown nested parameter", "POST", "Action=DescribeSubnets&Filter.1.Name=vpc-id&Filter.1.Value.1=x&Filter.1.Bogus=1", 400, "UnknownParameter"},
		{"non-numeric list index", "POST", "Action=DescribeSubnets&SubnetId.x=subnet-0aaaaaaaaaaaaaaaa", 400, "UnknownParameter"},
		{"wrong type int", "POST", "Action=CreateNetworkInterface&SubnetId=subnet-0aaaaaaaaaaaaaaaa&SecondaryPrivateIpAddressCount=many", 400, "InvalidParameterValue"},
		{"negative count", "POST", "Action=CreateNetworkInterface&SubnetId=subnet-0aaaaaaaaaaaaaaaa&SecondaryPrivateIpAddressCount=-1", 400, "InvalidParameterValue"},
		{"wrong type bool", "POST", "Action=DetachNetworkInterface&AttachmentId=eni-attach-0123456789abcdef0&Force=maybe", 400, "InvalidParameterValue"},
		{"missing required", "POST", "Action=DeleteNetworkInterface", 400, "MissingParameter"},
		{"malformed eni id", "POST", "Action=DeleteNetworkInterface&NetworkInterfaceId=eni-XYZ", 400, "InvalidNetworkInterfaceID.Malformed"},
		{"malformed instance id", "POST", "Action=DescribeInstances&InstanceId.1=i-zz", 400, "InvalidInstanceID.Malformed"},
		{"malformed attachment id", "POST", "Action=DetachNetworkInterface&AttachmentId=att-1", 400, "InvalidAttachmentID.Malformed"},
		{"duplicate parameter", "POST", "Action=DescribeSubnets&MaxResults=5&MaxResults=6", 400, "MalformedQueryString"},
		{"empty key segment", "POST", "Action=DescribeSubnets&Filter..Name=x", 400, "MalformedQueryString"},
		{"int overflow", "POST", "Action=DescribeSubnets&MaxResults=99999999999999999999", 400, "InvalidParameterValue"},
		{"dry run", "POST", "Action=DescribeSubnets&DryRun=true", 412, "DryRunOperation"},
		{"unsupported method", "PUT", "Action=DescribeSubnets", 405, "UnsupportedHttpVerb"},
		{"binary garbage", "POST", "\x00\xff\xfe=\x01&&&==", 400, "MalformedQueryString"},
		{"no action, binary", "POST", "\x00\xff\xfe=\x01", 400, "MissingAction"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, h.sim.EC2Endpoint(), strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			var e struct {
				XMLName   xml.Name `xml:"Response"`
				Code      string   `xml:"Errors>Error>Code"`
				Message   string   `xml:"Errors>Error>Message"`
				RequestID string   `xml:"RequestID"`
			}
			if err := xml.Unmarshal(body, &e); err != nil {
				t.Fatalf("body %q is not an EC2 error: %v", body, err)
			}
			if resp.StatusCode != c.status || e.Code != c.code || e.Message == "" || e.RequestID == "" {
				t.Fatalf("got %d %+v; want %d %s with a message and request ID", resp.StatusCode, e, c.status, c.code)
			}
		})
	}
	// The server survived all of it.
	if _, err := h.ec2.DescribeSubnets(h.ctx, nil); err != nil {
		t.Fatalf("after malformed requests: %v", err)
	}
}
