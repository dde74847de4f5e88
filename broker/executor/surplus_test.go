package executor

import (
	"testing"

	"github.com/allotnet/allot/broker/store"
)

// TestSurplusNeedsStatedExcess: how many addresses a node can give back is
// its agent's to say; a report without that statement (an older agent)
// gives nothing back, and only attached ENIs and the primary are drawn on.
func TestSurplusNeedsStatedExcess(t *testing.T) {
	n := store.Node{Mode: "secondary-ip", WarmIPTarget: 1, IPv4PerENI: 10}
	attached := store.ENI{ID: "eni-2", DeviceIndex: 1, Status: store.ENIAttached, Addresses: []string{"10.0.1.10", "10.0.1.11"}}
	detached := store.ENI{ID: "eni-3", DeviceIndex: 2, Status: store.ENIDetached, Addresses: []string{"10.0.2.10", "10.0.2.11", "10.0.2.12"}}
	free := []string{"10.0.1.10", "10.0.1.11", "10.0.2.10", "10.0.2.11", "10.0.2.12"}
	enis := []store.ENI{attached, detached}

	if r := surplus(n, enis, store.Demand{}, store.Usage{Free: free}, 0); !r.Empty() {
		t.Errorf("without a stated excess: %+v, want nothing", r)
	}
	r := surplus(n, enis, store.Demand{}, store.Usage{Free: free, Excess: 5, HasExcess: true}, 0)
	if r.ENIID != attached.ID || len(r.Addresses) != 2 {
		t.Errorf("stated excess 5 with 2 on the attached ENI: %+v, want both of %s", r, attached.ID)
	}
}
