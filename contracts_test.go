package allot_test

import (
	"strings"
	"testing"
)

// TestClientsLinkNoBrokerInternals: the agent, the CNI plugin and allotctl
// speak to the broker through its API contract alone (proto/allot/v1 and
// its error table proto/allot/v1/rpcerr), never through the broker's own
// packages: a change inside the broker can't change what they link.
func TestClientsLinkNoBrokerInternals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the build graph")
	}
	for _, m := range []string{"./agent/cmd/allot-agent", "./cni/cmd/allot", "./broker/cmd/allotctl"} {
		self := strings.TrimSpace(goList(t, "-f", "{{.ImportPath}}", m))
		for _, d := range strings.Fields(goList(t, "-deps", "-f", "{{.ImportPath}}", m)) {
			if strings.HasPrefix(d, module+"/broker/") && d != self {
				t.Errorf("%s links %s; clients must import the API contract, not the broker", m, d)
			}
		}
	}
}
