package planner

import (
	"container/heap"
	"slices"
)

// Shape is one way to meet a node's whole demand: Assigns ENIs it has each
// filled by one AssignPrivateIpAddresses, and Creates new ENIs each created
// already filled (then attached and modified).
type Shape struct {
	Assigns, Creates int
}

// Shapes lists the ways to meet node n's whole demand (Pending and
// WarmShortfall less InFlight, in slots) that no other way beats in both
// counts, fewest Creates first; the first is what FewestCalls chooses up to
// which existing ENIs it fills. For k new ENIs the fewest Assigns are the
// existing ENIs with the most free slots that hold the rest. A node whose
// demand can't be met in full (the node or its ENI set is full) has one
// shape: every existing ENI with room and every new ENI it may get. A node
// with no demand has the shape {0, 0}.
func Shapes(n Node) []Shape {
	return shapesOf(newNodeState(&n, 0))
}

func shapesOf(s *nodeState) []Shape {
	var free []int // existing ENIs' free slots, most first (buildTargets)
	newCap, room := 0, 0
	for _, t := range s.targets {
		if t.isNew {
			room++
			newCap = t.capacity
		} else {
			free = append(free, t.capacity)
		}
	}
	var out []Shape
	for k := 0; k <= room; k++ {
		rest := s.totalSlots - k*newCap
		a, held := 0, 0
		for a < len(free) && held < rest {
			held += free[a]
			a++
		}
		if held < rest || len(out) > 0 && a >= out[len(out)-1].Assigns {
			continue
		}
		out = append(out, Shape{Assigns: a, Creates: k})
		if a == 0 {
			break
		}
	}
	if len(out) == 0 {
		out = []Shape{{Assigns: len(free), Creates: room}}
	}
	return out
}

// chooseShapes picks, for every node, how many new ENIs its demand goes to
// first (nodeState.creates), so that the Assign bucket and the new ENIs'
// buckets finish together, and returns the calls of the shapes picked, in
// all. A node it does not move keeps creates 0, and with it FewestCalls'
// order; a node whose shape the caller fixed (fixShapes) keeps it and is
// counted, never moved.
//
// Every node starts at its shape with the fewest Creates. While the Assigns
// would finish later than the new ENIs, the move that saves the most
// Assigns per new ENI (ties: fewer new ENIs, then InstanceID) takes one node
// to its next shape, if that brings the end of the whole demand earlier; a
// move that doesn't is dropped. With nodes whose moves all trade alike (the
// same Assigns for the same new ENIs, as in a burst over one instance type)
// this finds the best mix; otherwise it is a greedy approximation of it.
func chooseShapes(states []*nodeState, b Buckets) Shape {
	shapes := make([][]Shape, len(states))
	at := make([]int, len(states))
	q := &moveQueue{}
	var total Shape
	for i, s := range states {
		shapes[i] = shapesOf(s)
		at[i] = startShape(s, shapes[i])
		total.Assigns += shapes[i][at[i]].Assigns
		total.Creates += shapes[i][at[i]].Creates
		if !s.fixed && len(shapes[i]) > 1 {
			q.items = append(q.items, newMove(i, s, shapes[i][0], shapes[i][1]))
		}
	}
	heap.Init(q)
	for q.Len() > 0 {
		end := b.assignsDone(total.Assigns)
		if end <= b.createsDone(total.Creates) {
			break
		}
		m := heap.Pop(q).(move)
		a, c := total.Assigns-m.saves, total.Creates+m.costs
		if max(b.assignsDone(a), b.createsDone(c)) >= end {
			continue
		}
		total = Shape{Assigns: a, Creates: c}
		at[m.node]++
		s := states[m.node]
		s.creates = shapes[m.node][at[m.node]].Creates
		if next := at[m.node] + 1; next < len(shapes[m.node]) {
			heap.Push(q, newMove(m.node, s, shapes[m.node][at[m.node]], shapes[m.node][next]))
		}
	}
	return total
}

// startShape is the index in shapes of the shape a node starts from: the
// one the caller fixed, or the first.
func startShape(s *nodeState, shapes []Shape) int {
	if s.fixed {
		for i, sh := range shapes {
			if sh.Creates == s.creates {
				return i
			}
		}
	}
	return 0
}

// fixShapes sets the nodes that fixed names to the shape it gives them, if
// it is one of their shapes; those not named, or named with a shape they
// don't have, are left to the policy.
func fixShapes(states []*nodeState, fixed map[string]Shape) {
	if len(fixed) == 0 {
		return
	}
	for _, s := range states {
		sh, ok := fixed[s.node.InstanceID]
		if ok && slices.Contains(shapesOf(s), sh) {
			s.creates, s.fixed = sh.Creates, true
		}
	}
}

// withExpected returns states followed by the states of expected, numbered
// after them, for chooseShapes to balance; planning grants the latter
// nothing.
func withExpected(states []*nodeState, expected []Node) []*nodeState {
	if len(expected) == 0 {
		return states
	}
	all := slices.Clip(states)
	for i := range expected {
		all = append(all, newNodeState(&expected[i], len(states)+i))
	}
	return all
}

// Mix returns the calls MakeWith would plan for the nodes' whole demand
// under opt, and for Options.Expected's, in all: the Assigns and the new
// ENIs of the shapes its policy picks (Options.Shapes, where given). The
// executor asks it of demands it has not planned yet, to tell how many of
// each a burst known so far needs. Under Naive it answers as FewestCalls.
func Mix(nodes []Node, opt Options) Shape {
	_, states := newPlanning(nodes, nil)
	fixShapes(states, opt.Shapes)
	states = withExpected(states, opt.Expected)
	if opt.Policy == TimeOptimal && opt.Buckets.known() {
		return chooseShapes(states, opt.Buckets)
	}
	var total Shape
	for _, s := range states {
		shapes := shapesOf(s)
		sh := shapes[startShape(s, shapes)]
		total.Assigns += sh.Assigns
		total.Creates += sh.Creates
	}
	return total
}

// balance sets the shape of each of states under opt's policy: the fixed
// ones (Options.Shapes), then, under TimeOptimal, the balance over them and
// Options.Expected.
func balance(states []*nodeState, opt Options) {
	fixShapes(states, opt.Shapes)
	if opt.Policy == TimeOptimal && opt.Buckets.known() {
		chooseShapes(withExpected(states, opt.Expected), opt.Buckets)
	}
}

// Balance is the shape MakeWith's policy gives each node of a set, struck
// once over the whole set (Balanced), so that the set can be planned a part
// at a time (Options.Balance) with every node in the shape it gets when
// the whole set is planned at once.
type Balance struct {
	creates map[string]int // new ENIs filled first, by InstanceID (none: 0)
}

// Balanced strikes opt's balance over nodes (InstanceIDs unique) and
// opt.Expected, as MakeWith would over the same nodes. Planned with it,
// each node of any part of nodes gets the targets, in the same order, that
// MakeWith gives it over all of nodes; with budgets that cover every part
// and new ENIs of one subnet each, the parts' actions together are the
// whole plan's (only their order across parts differs).
func Balanced(nodes []Node, opt Options) *Balance {
	_, states := newPlanning(nodes, nil)
	balance(states, opt)
	b := &Balance{creates: map[string]int{}}
	for _, s := range states {
		if s.creates != 0 {
			b.creates[s.node.InstanceID] = s.creates
		}
	}
	return b
}

// apply gives states the shapes the balance chose for them.
func (b *Balance) apply(states []*nodeState) {
	for _, s := range states {
		s.creates = b.creates[s.node.InstanceID]
	}
}

// Calls says which kinds of call a plan gives node n, in the shape b gave
// it (nil: none): an Assign to an ENI it has, a new ENI. It follows the
// node's targets as planning fills them when budgets are no constraint;
// with a budget short, a plan may skip a target whose subnet cannot pay
// and use one Calls did not count.
func Calls(n Node, b *Balance) (assign, create bool) {
	s := newNodeState(&n, 0)
	if b != nil {
		s.creates = b.creates[n.InstanceID]
	}
	putNewFirst(s)
	left := s.totalSlots
	for _, t := range s.targets {
		if left <= 0 {
			break
		}
		if t.capacity <= 0 {
			continue
		}
		if t.isNew {
			create = true
		} else {
			assign = true
		}
		left -= t.capacity
	}
	return assign, create
}

// putNewFirst reorders a node's targets so its first s.creates new ENIs
// are filled before its existing ENIs (most free first), and any further
// new ENIs after them.
func putNewFirst(s *nodeState) {
	if s.creates <= 0 {
		return
	}
	fresh, old := splitNew(s.targets)
	k := min(s.creates, len(fresh))
	s.targets = slices.Concat(fresh[:k], old, fresh[k:])
}

// splitNew separates the new ENIs among targets from the existing ones,
// each part in the order it had.
func splitNew(targets []*target) (fresh, old []*target) {
	for _, t := range targets {
		if t.isNew {
			fresh = append(fresh, t)
		} else {
			old = append(old, t)
		}
	}
	return fresh, old
}

// move takes one node from one shape to the next.
type move struct {
	node         int
	id           string
	saves, costs int // Assigns saved, new ENIs added
}

func newMove(i int, s *nodeState, from, to Shape) move {
	return move{node: i, id: s.node.InstanceID, saves: from.Assigns - to.Assigns, costs: to.Creates - from.Creates}
}

// moveQueue is a max-heap of moves by Assigns saved per new ENI.
type moveQueue struct{ items []move }

func (q *moveQueue) Len() int { return len(q.items) }
func (q *moveQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	// a.saves/a.costs > b.saves/b.costs, in integers.
	if l, r := a.saves*b.costs, b.saves*a.costs; l != r {
		return l > r
	}
	if a.costs != b.costs {
		return a.costs < b.costs
	}
	if a.id != b.id {
		return a.id < b.id
	}
	return a.node < b.node
}
func (q *moveQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *moveQueue) Push(x any)    { q.items = append(q.items, x.(move)) }
func (q *moveQueue) Pop() any {
	n := len(q.items)
	x := q.items[n-1]
	q.items = q.items[:n-1]
	return x
}
