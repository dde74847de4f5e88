package imds

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// fakeSource is a stateful Source: tests change what IMDS shows by editing it,
// as the world model does when its lag elapses.
type fakeSource struct {
	mu sync.Mutex
	md map[string]Metadata
}

func (f *fakeSource) Metadata(id string) (Metadata, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	md, ok := f.md[id]
	return md, ok
}

func (f *fakeSource) update(id string, fn func(*Metadata)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	md := f.md[id]
	fn(&md)
	f.md[id] = md
}

const (
	instanceID = "i-0123456789abcdef0"
	mac0       = "02:00:00:00:00:01"
	mac1       = "02:00:00:00:00:02"
)

func newFakeSource() *fakeSource {
	return &fakeSource{md: map[string]Metadata{instanceID: {
		InstanceID:       instanceID,
		InstanceType:     "m5.large",
		AvailabilityZone: "us-east-1a",
		MAC:              mac0,
		LocalIPv4:        "10.0.1.10",
		Interfaces: []Interface{
			{
				MAC: mac0, ENIID: "eni-0000000000000000a", DeviceNumber: 0,
				SubnetID: "subnet-0a", SubnetCIDR: "10.0.1.0/24", VPCID: "vpc-01",
				VPCCIDRs:         []string{"10.0.0.0/16", "100.64.0.0/16"},
				SecurityGroupIDs: []string{"sg-01", "sg-02"},
				LocalIPv4s:       []string{"10.0.1.10", "10.0.1.11", "10.0.1.12"},
			},
			{
				MAC: mac1, ENIID: "eni-0000000000000000b", DeviceNumber: 1,
				SubnetID: "subnet-0b", SubnetCIDR: "10.0.2.0/24", VPCID: "vpc-01",
				VPCCIDRs:         []string{"10.0.0.0/16"},
				SecurityGroupIDs: []string{"sg-01"},
				LocalIPv4s:       []string{"10.0.2.20"},
				IPv4Prefixes:     []string{"10.0.2.32/28", "10.0.2.48/28"},
			},
		},
	}}}
}

// start serves a handler over HTTP and returns it with an SDK client whose
// endpoint is the test server (never the default 169.254.169.254).
func start(t *testing.T, src Source, opts Options) (*handler, *httptest.Server, *sdkimds.Client) {
	t.Helper()
	h := newHandler(instanceID, src, opts)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// No fallback to IMDSv1: a token problem must fail the test.
	c := sdkimds.New(sdkimds.Options{Endpoint: srv.URL, EnableFallback: aws.FalseTernary})
	return h, srv, c
}

func get(t *testing.T, c *sdkimds.Client, path string) (string, error) {
	t.Helper()
	out, err := c.GetMetadata(context.Background(), &sdkimds.GetMetadataInput{Path: path})
	if err != nil {
		return "", err
	}
	defer out.Content.Close()
	b, err := io.ReadAll(out.Content)
	return string(b), err
}

func statusOf(err error) int {
	var se interface{ HTTPStatusCode() int }
	if errors.As(err, &se) {
		return se.HTTPStatusCode()
	}
	return 0
}

func TestMetadataThroughSDK(t *testing.T) {
	_, _, c := start(t, newFakeSource(), Options{TokenRequired: true})
	p0 := "network/interfaces/macs/" + mac0 + "/"
	p1 := "network/interfaces/macs/" + mac1 + "/"
	cases := []struct{ path, want string }{
		{"instance-id", instanceID},
		{"instance-type", "m5.large"},
		{"placement/availability-zone", "us-east-1a"},
		{"mac", mac0},
		{"local-ipv4", "10.0.1.10"},
		{"network/interfaces/macs/", mac0 + "/\n" + mac1 + "/"},
		{"network/interfaces/macs", mac0 + "/\n" + mac1 + "/"},
		{"network/", "interfaces/"},
		{p0 + "interface-id", "eni-0000000000000000a"},
		{p0 + "device-number", "0"},
		{p1 + "device-number", "1"},
		{p0 + "subnet-id", "subnet-0a"},
		{p0 + "subnet-ipv4-cidr-block", "10.0.1.0/24"},
		{p0 + "vpc-id", "vpc-01"},
		{p0 + "vpc-ipv4-cidr-block", "10.0.0.0/16"},
		{p0 + "vpc-ipv4-cidr-blocks", "10.0.0.0/16\n100.64.0.0/16"},
		{p0 + "security-group-ids", "sg-01\nsg-02"},
		{p0 + "local-ipv4s", "10.0.1.10\n10.0.1.11\n10.0.1.12"},
		{p1 + "ipv4-prefix", "10.0.2.32/28\n10.0.2.48/28"},
		{p1 + "local-ipv4s", "10.0.2.20"},
		{p0, "device-number\ninterface-id\nlocal-ipv4s\nmac\nsecurity-group-ids\nsubnet-id\nsubnet-ipv4-cidr-block\nvpc-id\nvpc-ipv4-cidr-block\nvpc-ipv4-cidr-blocks"},
		{"", "instance-id\ninstance-type\nlocal-ipv4\nmac\nnetwork/\nplacement/"},
	}
	for _, tc := range cases {
		got, err := get(t, c, tc.path)
		if err != nil {
			t.Errorf("GetMetadata(%q): %v", tc.path, err)
			continue
		}
		if got != tc.want {
			t.Errorf("GetMetadata(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestNotFound(t *testing.T) {
	_, _, c := start(t, newFakeSource(), Options{TokenRequired: true})
	for _, p := range []string{
		"network/interfaces/macs/" + mac0 + "/ipv4-prefix", // empty list
		"network/interfaces/macs/02:00:00:00:00:99/local-ipv4s",
		"no-such-thing",
		"instance-id/extra",
	} {
		_, err := get(t, c, p)
		if got := statusOf(err); got != http.StatusNotFound {
			t.Errorf("GetMetadata(%q): status %d (err %v), want 404", p, got, err)
		}
	}
}

func TestUnknownInstanceIs404(t *testing.T) {
	src := newFakeSource()
	h := newHandler("i-gone", src, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := sdkimds.New(sdkimds.Options{Endpoint: srv.URL})
	if _, err := get(t, c, "instance-id"); statusOf(err) != http.StatusNotFound {
		t.Fatalf("err %v, want 404", err)
	}
}

// TestShowsSourceChanges checks the handler caches nothing: addresses the
// source makes visible (after its lag) appear on the next request.
func TestShowsSourceChanges(t *testing.T) {
	src := newFakeSource()
	_, _, c := start(t, src, Options{TokenRequired: true})
	p := "network/interfaces/macs/" + mac0 + "/ipv4-prefix"
	if _, err := get(t, c, p); statusOf(err) != http.StatusNotFound {
		t.Fatalf("before: err %v, want 404", err)
	}
	src.update(instanceID, func(md *Metadata) {
		md.Interfaces[0].IPv4Prefixes = []string{"10.0.1.64/28"}
		md.Interfaces = append(md.Interfaces, Interface{MAC: "02:00:00:00:00:03", ENIID: "eni-c", DeviceNumber: 2})
	})
	if got, err := get(t, c, p); err != nil || got != "10.0.1.64/28" {
		t.Fatalf("after: %q, %v", got, err)
	}
	got, err := get(t, c, "network/interfaces/macs/")
	if err != nil || !strings.Contains(got, "02:00:00:00:00:03/") {
		t.Fatalf("listing after attach: %q, %v", got, err)
	}
}

func TestRegionThroughSDK(t *testing.T) {
	_, _, c := start(t, newFakeSource(), Options{TokenRequired: true})
	out, err := c.GetRegion(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Region != "us-east-1" {
		t.Fatalf("region %q", out.Region)
	}
}

func do(t *testing.T, method, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestTokenTTLValidation(t *testing.T) {
	_, srv, _ := start(t, newFakeSource(), Options{TokenRequired: true})
	for _, tc := range []struct {
		ttl  string
		want int
	}{
		{"", 400}, {"0", 400}, {"-1", 400}, {"21601", 400}, {"abc", 400},
		{"1", 200}, {"21600", 200},
	} {
		hdr := map[string]string{}
		if tc.ttl != "" {
			hdr[tokenTTLHeader] = tc.ttl
		}
		resp := do(t, http.MethodPut, srv.URL+tokenPath, hdr)
		if resp.StatusCode != tc.want {
			t.Errorf("ttl %q: status %d, want %d", tc.ttl, resp.StatusCode, tc.want)
		}
		if tc.want == 200 && resp.Header.Get(tokenTTLHeader) != tc.ttl {
			t.Errorf("ttl %q: echoed %q", tc.ttl, resp.Header.Get(tokenTTLHeader))
		}
	}
	if r := do(t, http.MethodGet, srv.URL+tokenPath, nil); r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET token: %d", r.StatusCode)
	}
	if r := do(t, http.MethodPut, srv.URL+tokenPath, map[string]string{tokenTTLHeader: "60", "X-Forwarded-For": "1.2.3.4"}); r.StatusCode != http.StatusForbidden {
		t.Errorf("proxied PUT token: %d", r.StatusCode)
	}
}

func newToken(t *testing.T, url, ttl string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url+tokenPath, nil)
	req.Header.Set(tokenTTLHeader, ttl)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestTokenRules(t *testing.T) {
	for _, required := range []bool{true, false} {
		h, srv, _ := start(t, newFakeSource(), Options{TokenRequired: required})
		var mu sync.Mutex
		now := time.Unix(1_700_000_000, 0)
		h.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		url := srv.URL + metaDataPath + "/instance-id"

		wantNoToken := 200
		if required {
			wantNoToken = 401
		}
		if r := do(t, http.MethodGet, url, nil); r.StatusCode != wantNoToken {
			t.Errorf("required=%v no token: %d, want %d", required, r.StatusCode, wantNoToken)
		}
		if r := do(t, http.MethodGet, url, map[string]string{tokenHeader: "bogus"}); r.StatusCode != 401 {
			t.Errorf("required=%v bogus token: %d, want 401", required, r.StatusCode)
		}
		tok := newToken(t, srv.URL, "60")
		if r := do(t, http.MethodGet, url, map[string]string{tokenHeader: tok}); r.StatusCode != 200 {
			t.Errorf("required=%v valid token: %d", required, r.StatusCode)
		}
		mu.Lock()
		now = now.Add(61 * time.Second)
		mu.Unlock()
		if r := do(t, http.MethodGet, url, map[string]string{tokenHeader: tok}); r.StatusCode != 401 {
			t.Errorf("required=%v expired token: %d, want 401", required, r.StatusCode)
		}
		if r := do(t, http.MethodPost, url, nil); r.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST: %d", r.StatusCode)
		}
	}
}

// TestSDKRecoversFromExpiredToken: the SDK caches its token by its own clock;
// when IMDS has expired it, the 401 must make the SDK fetch a new one.
func TestSDKRecoversFromExpiredToken(t *testing.T) {
	h, _, c := start(t, newFakeSource(), Options{TokenRequired: true})
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	h.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	if _, err := get(t, c, "instance-id"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	got, err := get(t, c, "instance-id")
	if err != nil || got != instanceID {
		t.Fatalf("after server-side expiry: %q, %v", got, err)
	}
	h.mu.Lock()
	n := len(h.tokens)
	h.mu.Unlock()
	if n != 1 {
		t.Fatalf("expired tokens not purged: %d live", n)
	}
}

// TestIdentitySignatureServed: with a Signer the signature is served next
// to the document and listed under instance-identity/; without one it is
// not found, so an agent can tell "not offered" from "failed".
func TestIdentitySignatureServed(t *testing.T) {
	for _, signed := range []bool{false, true} {
		opts := Options{TokenRequired: true}
		if signed {
			opts.Signer = NewSigner("us-east-1")
		}
		_, _, c := start(t, newFakeSource(), opts)
		list, err := c.GetDynamicData(context.Background(), &sdkimds.GetDynamicDataInput{Path: "instance-identity/"})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(list.Content)
		list.Content.Close()
		want := "document"
		if signed {
			want = "document\nsignature"
		}
		if string(b) != want {
			t.Errorf("signed=%v: listing %q, want %q", signed, b, want)
		}
		out, err := c.GetDynamicData(context.Background(), &sdkimds.GetDynamicDataInput{Path: "instance-identity/signature"})
		if !signed {
			if statusOf(err) != http.StatusNotFound {
				t.Errorf("unsigned: signature err %v, want 404", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sig, _ := io.ReadAll(out.Content)
		out.Content.Close()
		for _, line := range strings.Split(string(sig), "\n") {
			if len(line) == 0 || len(line) > 64 {
				t.Errorf("signature line of %d characters, want 1..64", len(line))
			}
		}
	}
}
