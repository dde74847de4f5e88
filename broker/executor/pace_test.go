package executor_test

import (
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
)

// TestLookahead: with a bucket that holds one token and refills one a
// second (1% share), four nodes asking for one prefix each are not all
// queued at once: the first plan takes what the bucket can start now. The
// others' demand grows meanwhile (more pods arrive), and each of them is
// served by one call of two prefixes planned when its token is near,
// instead of one call planned early and another for what grew.
func TestLookahead(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 4, instanceType: "c5.xlarge", share: 0.01})
	for _, inst := range e.insts {
		e.register(t, inst, 1, 0, func(n *store.Node) { n.Mode = "prefix" })
	}
	var mu sync.Mutex
	var plans []planner.Plan
	first := make(chan struct{})
	// Fewest calls: one Assign per node, so the waits are the Assign
	// bucket's alone (a time-optimal plan would create ENIs as well).
	r := e.start(t, executor.Config{Gather: time.Millisecond, Lookahead: 10 * time.Millisecond, PlanPolicy: planner.FewestCalls, Logger: plansTo(func(p planner.Plan) {
		mu.Lock()
		defer mu.Unlock()
		plans = append(plans, p)
		if len(plans) == 1 {
			close(first)
		}
	})})
	<-first
	mu.Lock()
	early := map[string]bool{}
	for _, a := range plans[0].Actions {
		early[a.InstanceID] = true
	}
	mu.Unlock()
	if len(early) == 0 || len(early) == len(e.insts) {
		t.Fatalf("first plan covers %d of %d nodes; the bucket could start 1", len(early), len(e.insts))
	}
	want := map[string]int{}
	for _, inst := range e.insts {
		if early[inst.ID] {
			want[inst.ID] = 16
			continue
		}
		e.demand(t, inst.ID, 20, 0)
		want[inst.ID] = 32
	}
	ctx := ctxT(t)
	waitFor(t, "every node served", 60*time.Second, func() (bool, error) { return e.satisfied(ctx, want) })
	time.Sleep(300 * time.Millisecond)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	perNode := map[string][]int{}
	for _, p := range plans {
		for _, a := range p.Actions {
			perNode[a.InstanceID] = append(perNode[a.InstanceID], a.Count)
		}
	}
	for _, inst := range e.insts {
		got := perNode[inst.ID]
		switch {
		case early[inst.ID] && (len(got) != 1 || got[0] != 1):
			t.Errorf("%s (planned first): actions %v, want one of 1 prefix", inst.ID, got)
		case !early[inst.ID] && (len(got) != 1 || got[0] != 2):
			t.Errorf("%s (planned later): actions %v, want one of 2 prefixes", inst.ID, got)
		}
	}
	if n := e.sim.Counters()["AssignPrivateIpAddresses"]; int(n.Calls) != len(e.insts) || n.Throttled != 0 {
		t.Errorf("AssignPrivateIpAddresses: %d calls, %d throttled; want %d and 0", n.Calls, n.Throttled, len(e.insts))
	}
}
