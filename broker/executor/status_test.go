package executor_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// TestUnmetStatusPublished: a budget refusal is written to the node's
// status record once, naming the subnet, limit and use; further rounds with
// the same refusal write nothing; once the demand is gone the record is
// cleared.
func TestUnmetStatusPublished(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 1})
	inst := e.insts[0]
	ctx := ctxT(t)
	sn, err := e.st.PutSubnet(ctx, store.Subnet{ID: subnetID, CIDR: "10.0.0.0/17", AvailabilityZone: "us-east-1a", VPCID: inst.VPCID, Usable: 32768 - 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.SetSubnetBudget(ctx, subnetID, sn.Usable, 0); err != nil {
		t.Fatal(err)
	}
	e.register(t, inst, 5, 0, nil)
	r := e.start(t, executor.Config{})

	var st store.NodeStatus
	waitFor(t, "a published budget status", 20*time.Second, func() (bool, error) {
		st, err = e.st.GetNodeStatus(ctx, inst.ID)
		if errors.Is(err, rpcerr.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	})
	if st.Reason != store.UnmetBudget {
		t.Fatalf("reason %q, want %q", st.Reason, store.UnmetBudget)
	}
	for _, want := range []string{subnetID, "limit 0", "in use 0"} {
		if !strings.Contains(st.Message, want) {
			t.Errorf("message %q does not say %q", st.Message, want)
		}
	}
	writes := e.st.Writes()["PutNodeStatus"]
	rounds := r.eng.Stats().Rounds
	waitFor(t, "five more rounds", 20*time.Second, func() (bool, error) {
		return r.eng.Stats().Rounds >= rounds+5, nil
	})
	if got := e.st.Writes()["PutNodeStatus"]; got != writes {
		t.Errorf("an unchanged refusal was written %d more times", got-writes)
	}

	e.demand(t, inst.ID, 0, 0)
	waitFor(t, "the status cleared", 20*time.Second, func() (bool, error) {
		_, err := e.st.GetNodeStatus(ctx, inst.ID)
		return errors.Is(err, rpcerr.ErrNotFound), nil
	})
}
