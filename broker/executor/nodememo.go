package executor

import (
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
)

// nodeMemo remembers each node's planner view between rounds, so a round
// builds again only the views of nodes whose records changed: during a
// burst thousands of nodes want addresses in every round, and each view
// (its ENIs, its subnets, its security groups) would be built afresh for
// every one. The view kept is the node's without its demand (Pending,
// WarmShortfall and InFlight are set every round); it is told apart by the
// node record's etcd revision, the node's ENI list (the followed view
// replaces a node's list on any change to it; the memo keeps the list, so
// its memory is not reused for another), and the instance type's limits.
// Only a node whose placement follows from its own record is kept: with
// pod networks a node's subnets depend on theirs, and a prefix-mode node's
// on which subnets have a free /28 now.
//
// Whether a node can be served in more than one shape (planner.Shapes) is
// kept too, with the demand it was worked out for.
type nodeMemo map[string]*nodeMemoed

type nodeMemoed struct {
	rev  int64
	enis []store.ENI
	lim  planner.Limits
	pn   planner.Node
	// slots are the address slots enis hold (slotsOf), what a demand's
	// Known is weighed against.
	slots int
	// demand is the (Pending, WarmShortfall, InFlight) choice was worked
	// out for; known says it was.
	demand [3]int
	choice bool
	known  bool
	// callsFor is the demand assign and create (planner.Calls without a
	// balance) were worked out for; callsKnown says they were.
	callsFor       [3]int
	assign, create bool
	callsKnown     bool
}

// calls returns the kinds of call kept for the node's view with demand,
// if kept (m may be nil: nothing is).
func (m *nodeMemoed) calls(demand [3]int) (assign, create, ok bool) {
	if m == nil || !m.callsKnown || m.callsFor != demand {
		return false, false, false
	}
	return m.assign, m.create, true
}

// keepCalls keeps the kinds of call worked out for the node's view with
// demand (m may be nil: nothing is kept).
func (m *nodeMemoed) keepCalls(demand [3]int, assign, create bool) {
	if m != nil {
		m.callsFor, m.assign, m.create, m.callsKnown = demand, assign, create, true
	}
}

// memoable reports whether node n's view may be kept: it has a revision
// and its placement depends on its record alone.
func memoable(snap *snapshot, n store.Node, lim planner.Limits) bool {
	return n.Rev != 0 && len(snap.podnets) == 0 && !(mode(n.Mode) == planner.Prefix && lim.PrefixCapable)
}

// get returns the kept view of node n and the slots of its ENIs, if
// nothing they were worked out from changed.
func (m nodeMemo) get(n store.Node, enis []store.ENI, lim planner.Limits) (planner.Node, int, bool) {
	was, ok := m[n.InstanceID]
	if !ok || was.rev != n.Rev || was.lim != lim || !sameList(was.enis, enis) {
		return planner.Node{}, 0, false
	}
	return was.pn, was.slots, true
}

// put keeps node n's view pn, built from enis and lim, and returns the
// slots of enis.
func (m nodeMemo) put(n store.Node, enis []store.ENI, lim planner.Limits, pn planner.Node) int {
	pn.Pending, pn.WarmShortfall, pn.InFlight = 0, 0, 0
	slots := slotsOf(enis)
	m[n.InstanceID] = &nodeMemoed{rev: n.Rev, enis: enis, lim: lim, pn: pn, slots: slots}
	return slots
}

// hasChoice reports whether node pn can be served in more than one shape,
// from the memo when its view and demand are those it was worked out for.
func (m nodeMemo) hasChoice(pn planner.Node) bool {
	was, ok := m[pn.InstanceID]
	demand := [3]int{pn.Pending, pn.WarmShortfall, pn.InFlight}
	if ok && was.known && was.demand == demand && sameView(was.pn, pn) {
		return was.choice
	}
	choice := len(planner.Shapes(pn)) > 1
	if ok && sameView(was.pn, pn) {
		was.demand, was.choice, was.known = demand, choice, true
	}
	return choice
}

// sameView reports whether pn is the kept view a (with a demand of its
// own): the same ENI list and limits, as get hands it out.
func sameView(a, pn planner.Node) bool {
	return a.Limits == pn.Limits && a.Mode == pn.Mode && a.MaxENIs == pn.MaxENIs && a.Busy == pn.Busy &&
		len(a.ENIs) > 0 && len(a.ENIs) == len(pn.ENIs) && &a.ENIs[0] == &pn.ENIs[0]
}
