package executor

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
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

// TestSurplusMemo: over a run of changes to a node's records (its usage,
// its demand, its ENIs, the node itself), the memo answers what surplus
// works out afresh every time.
func TestSurplusMemo(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	addrs := func(eni, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("10.0.%d.%d", eni, 10+i))
		}
		return out
	}
	n := store.Node{InstanceID: "i-1", Mode: "secondary-ip", IPv4PerENI: 15, Rev: 1}
	enis := []store.ENI{
		{ID: "eni-1", Primary: true, Status: store.ENIAttached, Addresses: addrs(1, 14), Rev: 1},
		{ID: "eni-2", DeviceIndex: 1, Status: store.ENIAttached, Addresses: addrs(2, 14), Rev: 1},
	}
	var d store.Demand
	u := store.Usage{InstanceID: "i-1", Free: addrs(2, 14), Assigned: addrs(1, 3), Excess: 14, HasExcess: true, Rev: 1}
	memo := surplusMemo{}
	rev := int64(1)
	found := 0
	for step := range 300 {
		rev++
		switch r.Intn(5) {
		case 0:
			u.Free = addrs(1+r.Intn(2), r.Intn(15))
			u.Excess, u.Rev = r.Intn(20), rev
		case 1:
			d = store.Demand{InstanceID: "i-1", WarmShortfall: r.Intn(2) * r.Intn(5), Rev: rev}
		case 2:
			enis = slices.Clone(enis)
			enis[1].Status = []string{store.ENIAttached, store.ENIDetached}[r.Intn(2)]
		case 3:
			n.WarmIPTarget, n.Rev = r.Intn(3), rev
		}
		want := surplus(n, enis, d, u, 4)
		if got := memo.surplus(n, enis, d, u, 4); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: memo says %+v, surplus %+v", step, got, want)
		}
		if !want.Empty() {
			found++
		}
	}
	if found < 30 {
		t.Errorf("only %d of 300 steps had a surplus: the test does not exercise the memo", found)
	}
}
