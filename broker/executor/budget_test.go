package executor_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// budgetRefusal waits until the engine reports the node's demand unmet for
// lack of budget and returns that error.
func budgetRefusal(t *testing.T, r *running, node string) *rpcerr.BudgetError {
	t.Helper()
	var be *rpcerr.BudgetError
	waitFor(t, "a budget refusal for "+node, 20*time.Second, func() (bool, error) {
		err := r.eng.Unmet()[node]
		return errors.As(err, &be), err
	})
	return be
}

// checkNothingHalfDone fails if a refused demand left anything behind: an
// EC2 call, an ENI of ours, an open intent or a reservation.
func (e *env) checkNothingHalfDone(t *testing.T) {
	t.Helper()
	for _, action := range mutating {
		if c := e.sim.Counters()[action].Calls; c != 0 {
			t.Errorf("%s called %d times after a budget refusal", action, c)
		}
	}
	if n := len(e.ours()); n != 0 {
		t.Errorf("%d ENIs of ours exist in EC2 after a budget refusal", n)
	}
	open, err := e.st.ListOpenIntents(ctxT(t))
	if err != nil || len(open) != 0 {
		t.Errorf("open intents after a budget refusal: %v (%v)", open, err)
	}
	e.checkAccounts(t)
}

// TestBudgetRefused: a subnet with no budget left for the cluster refuses
// the demand with an error naming the subnet, its limit and its use, and
// nothing is half done.
func TestBudgetRefused(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 1})
	inst := e.insts[0]
	ctx := ctxT(t)
	sn, err := e.st.PutSubnet(ctx, store.Subnet{ID: subnetID, CIDR: "10.0.0.0/17", AvailabilityZone: "us-east-1a", VPCID: inst.VPCID, Usable: 32768 - 5})
	if err != nil {
		t.Fatal(err)
	}
	// Every usable address is kept for others in the account.
	if _, err := e.st.SetSubnetBudget(ctx, subnetID, sn.Usable, 0); err != nil {
		t.Fatal(err)
	}
	e.register(t, inst, 5, 0, nil)
	r := e.start(t, executor.Config{})
	be := budgetRefusal(t, r, inst.ID)
	if be.SubnetID != subnetID || be.Limit != 0 || be.Requested != 5 {
		t.Errorf("budget error %+v: want subnet %s, limit 0, requested 5", be, subnetID)
	}
	for _, want := range []string{subnetID, "budget exceeded", "limit 0", "requested 5"} {
		if !strings.Contains(be.Error(), want) {
			t.Errorf("error %q does not say %q", be.Error(), want)
		}
	}
	time.Sleep(200 * time.Millisecond) // a few more rounds
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	e.checkNothingHalfDone(t)
}

// TestBudgetRefusedAtIntent: the budget shrinks between planning and the
// intent (an operator lowers the cap). The store refuses the intent; no EC2
// call is made, no reservation is left, the node reports the refusal; and
// once the budget is back the demand is met.
func TestBudgetRefusedAtIntent(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 1})
	inst := e.insts[0]
	e.register(t, inst, 12, 0, nil)
	var once sync.Once
	r := e.start(t, executor.Config{Logger: plansTo(func(planner.Plan) {
		once.Do(func() {
			sn, err := e.st.GetSubnet(ctxT(t), subnetID)
			if err == nil {
				_, err = e.st.SetSubnetBudget(ctxT(t), subnetID, sn.Usable, 0)
			}
			if err != nil {
				t.Errorf("shrinking the budget: %v", err)
			}
		})
	})})
	be := budgetRefusal(t, r, inst.ID)
	if be.SubnetID != subnetID || be.Limit != 0 {
		t.Errorf("budget error %+v: want subnet %s with limit 0", be, subnetID)
	}
	waitFor(t, "the refusal counted", 10*time.Second, func() (bool, error) {
		return r.eng.Stats().BudgetRefused > 0, nil
	})
	time.Sleep(200 * time.Millisecond)
	e.checkNothingHalfDone(t)

	if _, err := e.st.SetSubnetBudget(ctxT(t), subnetID, 0, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "demand met once the budget is back", 20*time.Second, func() (bool, error) {
		return e.satisfied(ctxT(t), map[string]int{inst.ID: 12})
	})
	if err := r.eng.Unmet()[inst.ID]; err != nil {
		t.Errorf("node still reports unmet demand: %v", err)
	}
	e.checkNoDuplicates(t)
	e.checkMatchesEC2(t)
	e.checkAccounts(t)
}
