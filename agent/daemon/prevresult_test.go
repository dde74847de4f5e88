package daemon

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/allotnet/allot/agent/cniserver"
)

// TestPrevResultHostile: a prevResult with null or odd entries is an
// invalid request or a failed check, never a crash of the agent.
func TestPrevResultHostile(t *testing.T) {
	addr := netip.MustParseAddr("10.0.0.7")
	for _, tc := range []struct {
		name, raw string
		want      error // nil: holds
	}{
		{"the address", `{"cniVersion":"1.1.0","ips":[{"address":"10.0.0.7/32"}]}`, nil},
		// The plugin converts a prevResult to the current version first.
		{"the address, 0.4.0", `{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.0.0.7/32"}]}`, cniserver.ErrInvalidRequest},
		{"null ip, 1.1.0", `{"cniVersion":"1.1.0","ips":[null]}`, cniserver.ErrInvalidRequest},
		{"null then the address", `{"cniVersion":"1.1.0","ips":[null,{"address":"10.0.0.7/32"}]}`, cniserver.ErrInvalidRequest},
		{"null lists, 1.0.0", `{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.7/32"}],"interfaces":[null],"routes":[null]}`, cniserver.ErrInvalidRequest},
		{"null ip, 0.4.0", `{"cniVersion":"0.4.0","ips":[null],"interfaces":[null],"routes":[null]}`, cniserver.ErrInvalidRequest},
		{"null route, 0.3.1", `{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.0.0.7/32"}],"routes":[ null ]}`, cniserver.ErrInvalidRequest},
		{"another address", `{"cniVersion":"1.1.0","ips":[{"address":"10.0.0.8/32"}]}`, cniserver.ErrCheckFailed},
		{"no address", `{"cniVersion":"1.1.0","ips":[{}]}`, cniserver.ErrCheckFailed},
		{"ips not a list", `{"cniVersion":"1.1.0","ips":{}}`, cniserver.ErrInvalidRequest},
		{"empty", ``, cniserver.ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := prevResultHolds([]byte(tc.raw), addr)
			switch {
			case tc.want == nil:
				if err != nil {
					t.Fatalf("%s: %v, want held", tc.raw, err)
				}
			case !errors.Is(err, tc.want):
				t.Fatalf("%s: %v, want %v", tc.raw, err, tc.want)
			}
		})
	}
}
