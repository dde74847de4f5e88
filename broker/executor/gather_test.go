package executor_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/store"
)

// TestGather: a prefix-mode node states its demand three times in quick
// succession, as an agent does while a burst of pods arrives, while the
// buckets are the constraint (emptied, refilling at EC2's rate). The engine
// waits for the demand to settle and covers the final one with a single
// AssignPrivateIpAddresses of two prefixes, not one call per statement.
func TestGather(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 1, instanceType: "c5.xlarge", scale: 1})
	inst := e.insts[0]
	e.register(t, inst, 0, 0, func(n *store.Node) { n.Mode = "prefix" })
	spend(t, e.ec2.Limiter(), planner.CallAssign, planner.CallCreate)

	var mu sync.Mutex
	var plans []planner.Plan
	r := e.start(t, executor.Config{Gather: 400 * time.Millisecond, GatherMax: 5 * time.Second, Logger: plansTo(func(p planner.Plan) {
		mu.Lock()
		plans = append(plans, p)
		mu.Unlock()
	})})
	for _, pending := range []int{1, 9, 30} {
		e.demand(t, inst.ID, pending, 0)
		time.Sleep(50 * time.Millisecond)
	}
	ctx := ctxT(t)
	waitFor(t, "30 addresses on the node", 30*time.Second, func() (bool, error) {
		return e.satisfied(ctx, map[string]int{inst.ID: 30})
	})
	time.Sleep(300 * time.Millisecond)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(plans) != 1 || len(plans[0].Actions) != 1 {
		t.Fatalf("plans = %+v; want one plan of one action", plans)
	}
	if a := plans[0].Actions[0]; a.Kind != planner.Assign || a.Count != 2 || a.Mode != planner.Prefix {
		t.Errorf("action = %+v; want one assign of 2 prefixes", a)
	}
	if got := e.sim.Counters()["AssignPrivateIpAddresses"].Calls; got != 1 {
		t.Errorf("AssignPrivateIpAddresses calls = %d, want 1", got)
	}
}

// TestNoGatherWithTokensToSpare: with the buckets full, a demand with pods
// waiting is planned at once though Gather is an hour: a second call for
// what the node's later pods add costs tokens no one needs now, and it
// does (at most one more call).
func TestNoGatherWithTokensToSpare(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 1, instanceType: "c5.xlarge"})
	inst := e.insts[0]
	e.register(t, inst, 0, 0, func(n *store.Node) { n.Mode = "prefix" })
	r := e.start(t, executor.Config{Gather: time.Hour, GatherMax: time.Hour})
	defer r.stop(t)
	ctx := ctxT(t)
	e.demand(t, inst.ID, 1, 0)
	waitFor(t, "the first pod's address despite an hour's Gather", 30*time.Second, func() (bool, error) {
		return e.satisfied(ctx, map[string]int{inst.ID: 1})
	})
	e.demand(t, inst.ID, 30, 0)
	waitFor(t, "30 addresses despite an hour's Gather", 30*time.Second, func() (bool, error) {
		return e.satisfied(ctx, map[string]int{inst.ID: 30})
	})
	if got := e.sim.Counters()["AssignPrivateIpAddresses"].Calls; got > 2 {
		t.Errorf("AssignPrivateIpAddresses calls = %d, want at most 2", got)
	}
}

// TestGatherSmallFullBuckets: the buckets are small (2% of EC2's: one
// Assign, one Create and one Attach in hand) and full, and three
// prefix-mode nodes each state their demand three times in quick
// succession, as an agent does while a burst of pods arrives: more nodes
// wait than the tokens in hand would pay two calls each, so each demand
// is left to settle and served by one action, not one per statement,
// although the full buckets lose refill meanwhile. (Planned at once, or
// after a quarter of the gather, while a bucket would overflow, a burst's
// demands were served in two calls each for up to a third of the nodes.)
func TestGatherSmallFullBuckets(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 3, instanceType: "c5.xlarge", share: 0.02})
	want := map[string]int{}
	for _, inst := range e.insts {
		e.register(t, inst, 0, 0, func(n *store.Node) { n.Mode = "prefix" })
		want[inst.ID] = 30
	}
	r := e.start(t, executor.Config{Gather: 4 * time.Second, GatherMax: time.Hour})
	defer r.stop(t)
	time.Sleep(time.Second) // the engine learns the nodes' limits first
	for _, pending := range []int{1, 9, 30} {
		for _, inst := range e.insts {
			e.demand(t, inst.ID, pending, 0)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx := ctxT(t)
	waitFor(t, "30 addresses on every node", 30*time.Second, func() (bool, error) {
		return e.satisfied(ctx, want)
	})
	c := e.sim.Counters()
	if got := c["AssignPrivateIpAddresses"].Calls + c["CreateNetworkInterface"].Calls; got != 3 {
		t.Errorf("Assigns and Creates = %d, want 3: one per node", got)
	}
}

// TestEarlyFromFullBuckets: twelve prefix-mode nodes, each stating once
// that 46 pods wait (3 prefixes), at a tenth of EC2's buckets (Assign and
// Create 9 tokens, Attach 4, each refilled at 0.5/s), full: too few
// tokens for the rule that plans at once, so the demands gather for 8 s,
// during which the full buckets would lose 4 tokens each. Some demands
// are planned early from those tokens, of both kinds (the time-optimal mix
// for the twelve sends 3 to new ENIs); no more than the buckets would lose
// (3 of each kind, counted a quarter of the gather in); every node still
// gets its prefixes in one action.
func TestEarlyFromFullBuckets(t *testing.T) {
	const nodes = 12
	e := newEnv(t, envOpts{nodes: nodes, instanceType: "c5.xlarge", share: 0.1, scale: 1})
	want := map[string]int{}
	for _, inst := range e.insts {
		e.register(t, inst, 46, 0, func(n *store.Node) { n.Mode = "prefix" })
		want[inst.ID] = 48
	}
	// Started once every demand is stated, the engine sees all twelve
	// waiting at once, however slowly they were written.
	var mu sync.Mutex
	var plans []planner.Plan
	r := e.start(t, executor.Config{Gather: 8 * time.Second, GatherMax: time.Hour, Logger: plansTo(func(p planner.Plan) {
		mu.Lock()
		plans = append(plans, p)
		mu.Unlock()
	})})
	ctx := ctxT(t)
	waitFor(t, "every node served", 30*time.Second, func() (bool, error) { return e.satisfied(ctx, want) })
	early := r.eng.Stats().Early
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if early < 1 || early > 6 {
		t.Errorf("%d actions planned early; want 1 to 6", early)
	}
	mu.Lock()
	defer mu.Unlock()
	perNode := map[string]int{}
	var first []planner.Kind
	for i, p := range plans {
		for _, a := range p.Actions {
			perNode[a.InstanceID]++
			if i == 0 {
				first = append(first, a.Kind)
			}
		}
	}
	for _, inst := range e.insts {
		if perNode[inst.ID] != 1 {
			t.Errorf("%s: %d actions, want 1", inst.ID, perNode[inst.ID])
		}
	}
	if early >= 2 && (!slices.Contains(first, planner.Assign) || !slices.Contains(first, planner.CreateAttach)) {
		t.Errorf("first plan %v: want an Assign and a new ENI", first)
	}
}

// TestEarlySpendsMostlyLostTokens: eight prefix-mode nodes state at one
// instant that 46 pods wait (3 prefixes each), at a twentieth of EC2's
// buckets (Assign and Create 4 tokens, Attach 1, each refilled at
// 0.25/s), full; too few tokens to plan at once, so the demands gather
// for 10 s. From a quarter of the gather in, the full buckets would lose
// 0.25 × 7.5 = 1.875 tokens each before the demands settle: two calls of
// each kind are spent early, not one, the second token being mostly
// lost otherwise (the round may come up to 1.5 s late and still spend
// two). Every node still gets its prefixes in one action.
func TestEarlySpendsMostlyLostTokens(t *testing.T) {
	const nodes = 8
	e := newEnv(t, envOpts{nodes: nodes, instanceType: "c5.xlarge", share: 0.05, scale: 1})
	ctx := ctxT(t)
	want := map[string]int{}
	for _, inst := range e.insts {
		e.register(t, inst, 0, 0, func(n *store.Node) { n.Mode = "prefix" })
		want[inst.ID] = 48
	}
	// One instant for every demand, however slowly they are written;
	// the engine, started after, sees all of them waiting at once.
	stated := time.Now()
	for _, inst := range e.insts {
		d := store.Demand{InstanceID: inst.ID, Pending: 46, UpdatedAt: stated}
		if err := e.st.PutDemand(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	actions := map[string]int{}
	r := e.start(t, executor.Config{Gather: 10 * time.Second, GatherMax: time.Hour, Logger: plansTo(func(p planner.Plan) {
		mu.Lock()
		for _, a := range p.Actions {
			actions[a.InstanceID]++
		}
		mu.Unlock()
	})})
	waitFor(t, "every node served", 90*time.Second, func() (bool, error) { return e.satisfied(ctxT(t), want) })
	early := r.eng.Stats().Early
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// One call of each kind (rounding the lost tokens down) would be 2.
	if early < 3 || early > 4 {
		t.Errorf("%d actions planned early; want 3 or 4 (two Assigns, one or two new ENIs)", early)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, inst := range e.insts {
		if actions[inst.ID] != 1 {
			t.Errorf("%s: %d actions, want 1", inst.ID, actions[inst.ID])
		}
	}
}

// TestGatherMax: a demand that keeps changing is planned once the node has
// wanted addresses for GatherMax, not held back for as long as it changes.
func TestGatherMax(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 1, instanceType: "c5.xlarge"})
	inst := e.insts[0]
	e.register(t, inst, 0, 0, nil)
	r := e.start(t, executor.Config{Gather: time.Hour, GatherMax: 300 * time.Millisecond})
	defer r.stop(t)
	e.demand(t, inst.ID, 5, 0)
	ctx := ctxT(t)
	waitFor(t, "5 addresses despite an hour's Gather", 30*time.Second, func() (bool, error) {
		return e.satisfied(ctx, map[string]int{inst.ID: 5})
	})
}

// TestKnownInFlight: a demand that says what it was computed against
// (Known) is served exactly. The delivered addresses count against a
// demand stated before they were seen, however long that demand stays
// stored, and a demand that counts them is served again at once — the
// clock plays no part.
func TestKnownInFlight(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 1, instanceType: "c5.xlarge"})
	inst := e.insts[0]
	e.register(t, inst, 0, 0, nil)
	ctx := ctxT(t)
	have := func() int {
		enis, err := e.st.ListNodeENIs(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, x := range enis {
			n += len(x.Addresses)
		}
		return n
	}
	base := have()
	known := func(pending, k int) {
		t.Helper()
		err := e.st.PutDemand(ctx, store.Demand{InstanceID: inst.ID, Pending: pending, Known: k, HasKnown: true})
		if err != nil {
			t.Fatal(err)
		}
	}
	r := e.start(t, executor.Config{Gather: time.Millisecond})
	defer r.stop(t)

	known(5, base)
	waitFor(t, "the first 5", 30*time.Second, func() (bool, error) {
		return e.satisfied(ctx, map[string]int{inst.ID: base + 5})
	})
	first := have()
	// The stored demand still says 5 against the old count: nothing more.
	time.Sleep(500 * time.Millisecond)
	if got := have(); got != first {
		t.Fatalf("a demand stated before the delivery was served again: %d addresses, then %d", first, got)
	}
	// The same numbers against the new count are a new need.
	known(5, first)
	waitFor(t, "5 more", 30*time.Second, func() (bool, error) {
		return e.satisfied(ctx, map[string]int{inst.ID: first + 5})
	})
	time.Sleep(300 * time.Millisecond)
	if got, want := have(), first+5; got < want || got > first+14 {
		t.Errorf("after the second demand: %d addresses, want %d..%d", got, want, first+14)
	}
}

// TestWarmGather: a demand with no pod waiting (warm targets only) is left
// to settle for WarmGather, not Gather; one with pods waiting is not.
func TestWarmGather(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 2, instanceType: "c5.xlarge"})
	warmOnly, waiting := e.insts[0], e.insts[1]
	e.register(t, warmOnly, 0, 5, nil)
	e.register(t, waiting, 5, 0, nil)
	r := e.start(t, executor.Config{Gather: 10 * time.Millisecond, WarmGather: time.Hour, GatherMax: 20 * time.Millisecond})
	defer r.stop(t)
	ctx := ctxT(t)
	waitFor(t, "the waiting pods' addresses", 30*time.Second, func() (bool, error) {
		return e.satisfied(ctx, map[string]int{waiting.ID: 5})
	})
	time.Sleep(500 * time.Millisecond)
	if ok, _ := e.satisfied(ctx, map[string]int{warmOnly.ID: 1}); ok {
		t.Fatal("a warm-only demand was planned before WarmGather passed")
	}
}

// spend takes every token of the actions' buckets, as another tool in the
// account would, each call answered as accepted.
func spend(t *testing.T, lim *ratelimit.Limiter, actions ...string) {
	t.Helper()
	for _, action := range actions {
		c := ratelimit.ClassOf(action, true)
		for lim.Tokens(c) >= 1 {
			turn, err := lim.Acquire(ctxT(t), c)
			if err != nil {
				t.Fatal(err)
			}
			turn.Done(ratelimit.Accepted)
		}
	}
}
