package plugin

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/allotnet/allot/agent/cniserver/cniwire"
)

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

// The result the plugin writes itself is the JSON the CNI library would
// print, field for field, for every version it writes (1.0.0, 1.1.0), and
// a runtime reading it gets the same result; for other versions, and for
// what it does not write, the library prints.
func TestResultJSONMatchesTheLibrary(t *testing.T) {
	base := cniwire.AddResult{Address: "10.0.1.20/32", Gateway: "169.254.1.1", HostIfName: "alt0123456789a",
		HostMAC: "02:00:00:00:00:01", ContainerMAC: "02:00:00:00:00:02", ENIID: "eni-1"}
	odd := base
	odd.HostIfName = "a\"b\\c\x01<d>&é"
	dns := types.DNS{Nameservers: []string{"10.100.0.10"}, Domain: "cluster.local",
		Search: []string{"ns.svc.cluster.local", "svc.cluster.local"}, Options: []string{"ndots:5"}}
	cases := []struct {
		name   string
		res    cniwire.AddResult
		netns  string
		dns    types.DNS
		modify func(*current.Result)
	}{
		{"as the agent answers", base, "/var/run/netns/cni-1234", types.DNS{}, nil},
		{"no gateway from the agent", cniwire.AddResult{Address: "10.0.0.5/32"}, "/proc/1/ns/net", types.DNS{}, nil},
		{"dns from the config", base, "/var/run/netns/x", dns, nil},
		{"only a domain", base, "/var/run/netns/x", types.DNS{Domain: "d"}, nil},
		{"strings to escape", odd, "/run/netns/\"quoted\"\n", types.DNS{Search: []string{"\t"}}, nil},
		{"an interface with an mtu", base, "/x", types.DNS{}, func(r *current.Result) { r.Interfaces[0].Mtu = 9001 }},
		{"a route with a metric (the library prints)", base, "/x", types.DNS{},
			func(r *current.Result) { r.Routes[0].Priority = 5 }},
		{"not UTF-8 (the library prints)", base, "/x\xff", types.DNS{}, nil},
	}
	for _, tc := range cases {
		for _, version := range []string{"1.0.0", "1.1.0", "0.4.0"} {
			t.Run(tc.name+" "+version, func(t *testing.T) {
				r, err := buildResult(tc.res, "eth0", tc.netns, tc.dns)
				if err != nil {
					t.Fatal(err)
				}
				if tc.modify != nil {
					tc.modify(r)
				}
				want := libraryJSON(t, r, version)
				var got bytes.Buffer
				if err := printResult(&got, r, version); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(decodeAny(t, got.Bytes()), decodeAny(t, want)) {
					t.Fatalf("printed\n%s\nthe library prints\n%s", got.Bytes(), want)
				}
				if version == "0.4.0" {
					return
				}
				back, err := current.NewResult(got.Bytes())
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

// The plugin writes 1.x results itself: its bytes are not the library's
// indented ones (so the test above compares two printers, not one).
func TestResultWrittenWithoutTheLibrary(t *testing.T) {
	r, err := buildResult(cniwire.AddResult{Address: "10.0.1.20/32"}, "eth0", "/x", types.DNS{})
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := printResult(&got, r, "1.1.0"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got.String(), "\n") || !strings.HasPrefix(got.String(), `{"cniVersion":"1.1.0","interfaces":[`) {
		t.Fatalf("printed %s", got.String())
	}
}
