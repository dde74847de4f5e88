package plugin

import (
	"bytes"
	"encoding/json"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/allotnet/allot/agent/cniserver/cniwire"
	"github.com/allotnet/allot/cni/cnispec"
)

// libraryResult is the result as the plugin built it with the CNI
// library's types.
func libraryResult(res cniwire.AddResult, ifName, netns string, dns types.DNS) *current.Result {
	gw := net.ParseIP(res.Gateway).To4()
	if gw == nil {
		gw = net.ParseIP(PodGateway.String()).To4()
	}
	_, addr, _ := net.ParseCIDR(res.Address)
	return &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: res.HostIfName, Mac: res.HostMAC},
			{Name: ifName, Mac: res.ContainerMAC, Sandbox: netns},
		},
		IPs:    []*current.IPConfig{{Interface: current.Int(1), Address: *addr, Gateway: gw}},
		Routes: []*types.Route{{Dst: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, GW: gw}},
		DNS:    dns,
	}
}

// libraryJSON is what the CNI library prints for r at version.
func libraryJSON(t *testing.T, r *current.Result, version string) []byte {
	t.Helper()
	out, err := r.GetAsVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := out.PrintTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// The ADD's result as the plugin prints it is the JSON the CNI library
// prints for the same result, field for field, in every version the
// plugin speaks, and a runtime reading it gets the same result.
func TestResultJSONMatchesTheLibrary(t *testing.T) {
	base := cniwire.AddResult{Address: "10.0.1.20/32", Gateway: "169.254.1.1", HostIfName: "alt0123456789a",
		HostMAC: "02:00:00:00:00:01", ContainerMAC: "02:00:00:00:00:02", ENIID: "eni-1"}
	odd := base
	odd.HostIfName = "a\"b\\c\x01<d>&é\u2028"
	dns := types.DNS{Nameservers: []string{"10.100.0.10"}, Domain: "cluster.local",
		Search: []string{"ns.svc.cluster.local", "svc.cluster.local"}, Options: []string{"ndots:5"}}
	cases := []struct {
		name  string
		res   cniwire.AddResult
		netns string
		dns   types.DNS
	}{
		{"as the agent answers", base, "/var/run/netns/cni-1234", types.DNS{}},
		{"no gateway from the agent", cniwire.AddResult{Address: "10.0.0.5/32"}, "/proc/1/ns/net", types.DNS{}},
		{"dns from the config", base, "/var/run/netns/x", dns},
		{"only a domain", base, "/var/run/netns/x", types.DNS{Domain: "d"}},
		{"strings to escape", odd, "/run/netns/\"quoted\"\n", types.DNS{Search: []string{"\t"}}},
		{"not UTF-8", base, "/x\xff\xc3", types.DNS{Options: []string{"\xe2\x28\xa1"}}},
	}
	for _, tc := range cases {
		for _, version := range Versions {
			t.Run(tc.name+" "+version, func(t *testing.T) {
				r, err := buildResult(tc.res, "eth0", tc.netns, cnispec.DNS(tc.dns))
				if err != nil {
					t.Fatal(err)
				}
				want := libraryJSON(t, libraryResult(tc.res, "eth0", tc.netns, tc.dns), version)
				got := r.Append(nil, version)
				if !reflect.DeepEqual(decodeAny(t, got), decodeAny(t, want)) {
					t.Fatalf("printed\n%s\nthe library prints\n%s", got, want)
				}
				if version == "0.4.0" {
					return
				}
				back, err := current.NewResult(got)
				if err != nil {
					t.Fatalf("a runtime can't read it: %v", err)
				}
				fromLib, err := current.NewResult(want)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(back, fromLib) {
					t.Fatalf("a runtime reads %+v, from the library's %+v", back, fromLib)
				}
			})
		}
	}
}

// The plugin writes its results itself: its bytes are not the library's
// indented ones (so the test above compares two printers, not one).
func TestResultWrittenWithoutTheLibrary(t *testing.T) {
	r, err := buildResult(cniwire.AddResult{Address: "10.0.1.20/32"}, "eth0", "/x", cnispec.DNS{})
	if err != nil {
		t.Fatal(err)
	}
	got := string(r.Append(nil, "1.1.0"))
	if strings.Contains(got, "\n") || !strings.HasPrefix(got, `{"cniVersion":"1.1.0","interfaces":[`) {
		t.Fatalf("printed %s", got)
	}
}
