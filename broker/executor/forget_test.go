package executor_test

import (
	"testing"
	"time"

	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
)

// TestDepartedNodeForgotten: two nodes' demands are unmet (their subnet has
// no budget left for the cluster); one node's record is deleted, as when
// its instance leaves the cluster. The engine stops listing the departed
// node as unmet while it still lists the other: what a round remembers per
// node does not outlive the node.
func TestDepartedNodeForgotten(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 2})
	ctx := ctxT(t)
	sn, err := e.st.PutSubnet(ctx, store.Subnet{ID: subnetID, CIDR: "10.0.0.0/17", AvailabilityZone: "us-east-1a", VPCID: e.insts[0].VPCID, Usable: 32768 - 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.SetSubnetBudget(ctx, subnetID, sn.Usable, 0); err != nil {
		t.Fatal(err)
	}
	stays, goes := e.insts[0].ID, e.insts[1].ID
	e.register(t, e.insts[0], 5, 0, nil)
	e.register(t, e.insts[1], 5, 0, nil)
	r := e.start(t, executor.Config{})
	budgetRefusal(t, r, stays)
	budgetRefusal(t, r, goes)
	if err := e.st.DeleteNode(ctx, goes); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the departed node no longer unmet", 20*time.Second, func() (bool, error) {
		_, listed := r.eng.Unmet()[goes]
		return !listed, nil
	})
	if r.eng.Unmet()[stays] == nil {
		t.Errorf("the node still registered is no longer listed unmet: %v", r.eng.Unmet())
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
