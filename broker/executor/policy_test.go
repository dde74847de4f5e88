package executor_test

import (
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/bench/lowerbound"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
)

// TestTimeOptimalBurst: 40 prefix nodes ask for 3 prefixes each at a tenth
// of EC2's buckets (Assign 9 tokens after the limiter's safety token,
// Attach 4, both refilled at 0.5/s). Fewest calls would be 40 Assigns, the
// last at (40-9)/0.5 = 62 s; time-optimal plans spread the nodes over the
// Assign bucket and new ENIs. The engine plans in several rounds (only what
// the buckets can start soon is admitted) and each round sees the buckets
// as the earlier rounds left them. Every node gets its prefixes in one
// action, the calls are exactly what the plans cost, none is throttled,
// and both kinds of action are used.
func TestTimeOptimalBurst(t *testing.T) {
	const nodes = 40
	e := newEnv(t, envOpts{nodes: nodes, instanceType: "c5.xlarge", share: 0.1})
	want := map[string]int{}
	for _, inst := range e.insts {
		e.register(t, inst, 46, 0, func(n *store.Node) { n.Mode = "prefix" })
		want[inst.ID] = 48
	}
	var mu sync.Mutex
	var plans []planner.Plan
	began := time.Now()
	r := e.start(t, executor.Config{Gather: time.Millisecond, Logger: plansTo(func(p planner.Plan) {
		mu.Lock()
		plans = append(plans, p)
		mu.Unlock()
	})})
	ctx := ctxT(t)
	waitFor(t, "every node served", 60*time.Second, func() (bool, error) { return e.satisfied(ctx, want) })
	took := time.Since(began)
	time.Sleep(300 * time.Millisecond)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	calls := map[string]int{}
	perNode := map[string]int{}
	for _, p := range plans {
		for k, n := range lowerbound.MinCalls(p) {
			calls[k] += n
		}
		for _, a := range p.Actions {
			perNode[a.InstanceID]++
			if a.Count != 3 {
				t.Errorf("%s: %s of %d prefixes, want 3", a.InstanceID, a.Kind, a.Count)
			}
		}
	}
	for _, inst := range e.insts {
		if perNode[inst.ID] != 1 {
			t.Errorf("%s: %d actions, want 1", inst.ID, perNode[inst.ID])
		}
	}
	if calls[planner.CallAssign] == 0 || calls[planner.CallCreate] == 0 {
		t.Errorf("calls %v: want Assigns and new ENIs both", calls)
	}
	got := e.sim.Counters()
	for _, action := range mutating {
		if int(got[action].Calls) != calls[action] {
			t.Errorf("%s: %d calls, the plans cost %d", action, got[action].Calls, calls[action])
		}
	}
	for action, c := range got {
		if c.Throttled != 0 {
			t.Errorf("%s: %d throttled; want none", action, c.Throttled)
		}
	}
	e.checkNoDuplicates(t)
	e.checkMatchesEC2(t)
	var nodesOf []planner.Node
	for _, inst := range e.insts {
		nodesOf = append(nodesOf, planner.Node{InstanceID: inst.ID, SubnetID: subnetID, Mode: planner.Prefix, Pending: 46,
			Limits: planner.Limits{MaxENIs: 4, IPv4PerENI: 15, PrefixCapable: true},
			ENIs:   []planner.ENI{{ID: inst.NetworkInterfaces[0].ID, SubnetID: subnetID, Primary: true}}})
	}
	opt, optCalls := lowerbound.TimeOptimal(nodesOf, 0.1, timeScale)
	fewest, _ := lowerbound.FewestCalls(nodesOf, 0.1, timeScale)
	t.Logf("%d plans, calls %v; served in %v (time-optimal floor %v with %v, fewest-calls floor %v)", len(plans), calls, took, opt, optCalls, fewest)
}
