package executor

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/ratelimit/ratelimittest"
	"github.com/allotnet/allot/broker/store"
)

// eagerWants is what a round planned from before views were made lazily:
// the view of every idle node whose demand has settled and is not met by
// what is in flight, in need order, and whether any can be served in more
// than one shape.
func eagerWants(e *Engine, rs *runState, snap *snapshot, free func(string) bool, settled func(string) bool) ([]planner.Node, bool) {
	var out []planner.Node
	for _, n := range snap.nodes {
		d := snap.demands.at(n.InstanceID)
		if d.Pending+d.WarmShortfall <= 0 || !free(n.InstanceID) || !settled(n.InstanceID) {
			continue
		}
		if snap.subnetQuarantined(n.SubnetID) != nil {
			continue
		}
		pn, why := e.plannerNode(rs, snap, n, d)
		if why != "" || pn.Pending+pn.WarmShortfall <= pn.InFlight {
			continue
		}
		out = append(out, pn)
	}
	need := func(n planner.Node) (int, int) {
		in := max(n.InFlight, 0)
		urgent := max(n.Pending-in, 0)
		if urgent > 0 {
			return urgent, 0
		}
		return 0, max(max(n.Pending, 0)+max(n.WarmShortfall, 0)-in, 0)
	}
	slices.SortStableFunc(out, func(a, b planner.Node) int {
		ua, wa := need(a)
		ub, wb := need(b)
		return cmp.Or(cmp.Compare(ub, ua), cmp.Compare(wb, wa), strings.Compare(a.InstanceID, b.InstanceID))
	})
	return out, slices.ContainsFunc(out, func(n planner.Node) bool { return len(planner.Shapes(n)) > 1 })
}

// randomRound changes burstState's cluster at random: demands of every
// kind (none, warm only, pods waiting, met by what is in flight, stated
// without Known, just changed so still gathering), or in one round of
// three burstState's burst (in which no node has a choice of shapes);
// nodes whose subnet or limits are not known, ENIs less full, nodes busy,
// in one round of four a pod network (no view is kept between rounds
// then), and in one of four the ENI lists of the round before.
func randomRound(r *rand.Rand, e *Engine, snap *snapshot, base []store.Node, baseENIs []store.ENI) (free func(string) bool) {
	busy := map[string]bool{}
	now := e.cfg.Clock.Now()
	uniform := r.IntN(3) == 0
	snap.podnets = nil
	if r.IntN(4) == 0 {
		snap.podnets = []store.PodNetwork{{Name: "elsewhere", Selector: store.NodeSelector{NodeGroup: "none-of-these"}}}
	}
	var enis []store.ENI
	for _, x := range baseENIs {
		if !uniform && !x.Primary && r.IntN(2) == 0 {
			x.Addresses = x.Addresses[:r.IntN(len(x.Addresses)+1)]
		}
		enis = append(enis, x)
	}
	for k, n := range base {
		id := n.InstanceID
		n.Rev = snap.nodes[k].Rev
		d := snap.demands.at(id)
		d.Pending, d.WarmShortfall = r.IntN(4)*r.IntN(20), r.IntN(3)*r.IntN(10)
		d.HasKnown = r.IntN(5) > 0
		d.UpdatedAt = now.Add(-time.Hour)
		if r.IntN(6) == 0 {
			d.UpdatedAt = now // still gathering
		}
		if uniform {
			d.Pending, d.WarmShortfall, d.HasKnown = 30, 14, true
		}
		snap.demands.set(id, d)
		switch r.IntN(12) {
		case 1:
			n.SubnetID = "subnet-unknown"
		case 2:
			n.MaxENIs, n.IPv4PerENI = 0, 0 // limits unknown
		}
		if r.IntN(3) == 0 {
			n.Rev++ // the node's record changed: its view is built again
		}
		snap.nodes[k], snap.node[id] = n, n
		busy[id] = r.IntN(8) == 0
	}
	if r.IntN(4) > 0 { // else the ENI lists stay, and views kept from before serve
		snap.fill(enis, nil, nil)
	}
	return func(id string) bool { return !busy[id] }
}

// TestWantsMatchEager: over 200 random rounds (views kept from the round
// before, as in a run), the nodes a round's parts take, in order, are the
// views a walk building every one would have had, no node that wants
// addresses left out and none that doesn't let in, and whether any node
// has a choice of shapes is the same.
func TestWantsMatchEager(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	clk := ratelimittest.NewManualClock(time.Now())
	e, snap := burstStateAt(300, clk)
	rs := newRunState(func(error) {})
	base := slices.Clone(snap.nodes)
	var baseENIs []store.ENI
	for _, n := range base {
		baseENIs = append(baseENIs, snap.byNode.at(n.InstanceID)...)
	}
	var choices, built, kept int
	for round := range 200 {
		free := randomRound(r, e, snap, base, baseENIs)
		now := e.cfg.Clock.Now()
		w, held, _ := e.plannable(rs, snap, free, now, true)
		settled := func(id string) bool {
			return !slices.ContainsFunc(held.list, func(g gatheringDemand) bool { return g.n.InstanceID == id })
		}
		want, choice := eagerWants(e, newRunState(func(error) {}), snap, free, settled)
		w.byNeed()
		var got []planner.Node
		for k := 1; ; k++ {
			part := w.take(k, nil, nil)
			if len(part) == 0 {
				break
			}
			got = append(got, part...)
		}
		// Parts of the nodes one kind of call serves, as when the other
		// kind has no room left: the kinds kept from a round before must
		// be the ones the node's view and demand give now.
		for _, kind := range []string{"assign", "create"} {
			serves := func(assign, create bool) bool { return kind == "assign" && assign || kind == "create" && create }
			var served, wantServed []string
			w.next = 0
			for part := w.take(5, serves, nil); len(part) > 0; part = w.take(5, serves, nil) {
				served = append(served, ids(part)...)
			}
			for _, n := range want {
				if serves(planner.Calls(n, nil)) {
					wantServed = append(wantServed, ids([]planner.Node{n})...)
				}
			}
			if !slices.Equal(served, wantServed) {
				t.Fatalf("round %d: nodes an %s serves:\n%v\nwant\n%v", round, kind, served, wantServed)
			}
		}
		if len(want) == 0 {
			t.Fatalf("round %d: no node wants addresses: the test shows nothing", round)
		}
		if !reflect.DeepEqual(ids(got), ids(want)) {
			t.Fatalf("round %d: parts took\n%v\nwant\n%v", round, ids(got), ids(want))
		}
		for k := range got {
			if !reflect.DeepEqual(got[k], want[k]) {
				t.Fatalf("round %d: view of %s\n%+v\nwant\n%+v", round, got[k].InstanceID, got[k], want[k])
			}
		}
		if w.choice != choice {
			t.Fatalf("round %d: choice = %v, want %v", round, w.choice, choice)
		}
		if choice {
			choices++
		}
		for _, x := range w.list {
			if x.built >= 0 {
				built++
			} else {
				kept++
			}
		}
		for _, g := range held.list {
			delete(rs.wanting, g.n.InstanceID) // the next round's demands are new
		}
		clk.Advance(time.Duration(r.IntN(3)) * time.Second)
	}
	// The rounds must have had both answers about shapes, and both views
	// built in the walk and views kept from a round before.
	if choices == 0 || choices == 200 || built == 0 || kept == 0 {
		t.Errorf("%d of 200 rounds with a choice of shapes, %d views built, %d kept: the rounds show too little", choices, built, kept)
	}
	t.Logf("%d of 200 rounds with a choice of shapes; %d views built in the walk, %d kept", choices, built, kept)
}

func ids(nodes []planner.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = fmt.Sprintf("%s(%d/%d/%d)", n.InstanceID, n.Pending, n.WarmShortfall, n.InFlight)
	}
	return out
}
