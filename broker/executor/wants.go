package executor

import (
	"cmp"
	"slices"

	"github.com/allotnet/allot/broker/planner"
)

// wants is a round's nodes that want addresses and may be planned now,
// known by their demand net of what is in flight; the planner's view of
// each is made only when a part of the round's plan takes the node
// (planInParts). During a burst of thousands of nodes the buckets admit a
// few calls a round, and every node's view copied into one list, sorted
// and copied again cost a round time and garbage in proportion to the
// cluster, for the few dozen nodes the round plans. Whether any node can
// be served in more than one shape is found on the way (the kept answer
// of nodeMemo, mostly); only then does the round need every view, for the
// balance between the kinds of call (planner.Balanced).
type wants struct {
	e    *Engine
	rs   *runState
	snap *snapshot
	list []want
	// built holds the views of nodes whose view is not kept between
	// rounds (nodeMemo), made once in the walk.
	built []planner.Node
	// choice says some node can be served in more than one shape.
	choice bool
	// next is the place in list of the first node not yet taken.
	next int
}

// want is one node of wants.
type want struct {
	i      int // place in snap.nodes
	urgent int // addresses for waiting pods, net of those in flight
	warm   int // with none waiting: the warm shortfall, net of those in flight
	// pending, shortfall and inFlight are the node's demand (Pending,
	// WarmShortfall) and its addresses in flight as the walk found them.
	pending, shortfall, inFlight int
	// built is the node's place in wants.built (-1: its view is kept).
	built int
}

// add notes node pn (at i in snap.nodes), whose view the walk just made;
// kept says the view is the one nodeMemo keeps, so it can be had again
// without being built.
func (w *wants) add(i int, pn planner.Node, kept, askChoice bool) {
	x := want{i: i, pending: pn.Pending, shortfall: pn.WarmShortfall, inFlight: pn.InFlight, built: -1}
	in := max(pn.InFlight, 0)
	x.urgent = max(pn.Pending-in, 0)
	if x.urgent == 0 {
		x.warm = max(max(pn.Pending, 0)+max(pn.WarmShortfall, 0)-in, 0)
	}
	if !kept {
		x.built = len(w.built)
		w.built = append(w.built, pn)
	}
	if askChoice && !w.choice {
		w.choice = w.rs.nodes.hasChoice(pn)
	}
	w.list = append(w.list, x)
}

// byNeed orders the list as a plan of all of them serves them: the most
// addresses for waiting pods first, then, among nodes with none waiting,
// the largest warm shortfall; ties by InstanceID (snap.nodes' order).
func (w *wants) byNeed() {
	slices.SortFunc(w.list, func(a, b want) int {
		return cmp.Or(cmp.Compare(b.urgent, a.urgent), cmp.Compare(b.warm, a.warm), cmp.Compare(a.i, b.i))
	})
}

// view is the planner's view of x, with its demand as the walk found it.
func (w *wants) view(x want) planner.Node {
	if x.built >= 0 {
		return w.built[x.built]
	}
	n := w.snap.nodes[x.i]
	var pn planner.Node
	if was := w.rs.nodes[n.InstanceID]; was != nil {
		pn = was.pn
	} else {
		// Not reached: the walk kept the view this round, and a round
		// drops nothing from the memo. Build it again rather than plan
		// from nothing.
		pn, _, _ = w.e.plannerNodeKept(w.rs, w.snap, n, w.snap.demands.at(n.InstanceID))
	}
	pn.Pending, pn.WarmShortfall, pn.InFlight = x.pending, x.shortfall, x.inFlight
	return pn
}

// all returns every node's view, in the list's order.
func (w *wants) all() []planner.Node {
	out := make([]planner.Node, len(w.list))
	for k, x := range w.list {
		out[k] = w.view(x)
	}
	return out
}

// take returns the views of the next k nodes that serves keeps (nil: all),
// asked with the kinds of call a plan gives each in the shape b gave it
// (planner.Calls), and moves past the last one looked at.
//
// Once one kind of call has no room left in a burst, the nodes the other
// kind serves may be few and far down the list, and a round would make
// the view of every node on the way only to find it served by the kind
// with no room. Without a balance (b nil) the kinds of call follow from
// the node's kept view and its demand alone, so they are kept with the
// view (nodeMemo.calls) and a node whose answer is kept is passed by
// without its view.
func (w *wants) take(k int, serves func(assign, create bool) bool, b *planner.Balance) []planner.Node {
	var part []planner.Node
	for w.next < len(w.list) && len(part) < k {
		x := w.list[w.next]
		w.next++
		if serves == nil {
			part = append(part, w.view(x))
			continue
		}
		var was *nodeMemoed
		if b == nil && x.built < 0 {
			was = w.rs.nodes[w.snap.nodes[x.i].InstanceID]
		}
		demand := w.demand(x)
		if assign, create, ok := was.calls(demand); ok {
			if serves(assign, create) {
				part = append(part, w.view(x))
			}
			continue
		}
		pn := w.view(x)
		assign, create := planner.Calls(pn, b)
		was.keepCalls(demand, assign, create)
		if serves(assign, create) {
			part = append(part, pn)
		}
	}
	return part
}

// demand is x's (Pending, WarmShortfall, InFlight), the demand part of its
// view.
func (w *wants) demand(x want) [3]int {
	return [3]int{x.pending, x.shortfall, x.inFlight}
}
