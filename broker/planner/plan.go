package planner

import (
	"cmp"
	"slices"
	"sort"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Make plans the fewest EC2 calls that cover the nodes' demand within the
// subnet budgets: MakeWith under FewestCalls.
func Make(nodes []Node, budgets Budgets) Plan {
	return MakeWith(nodes, budgets, Options{Policy: FewestCalls})
}

// MakeWith plans the EC2 calls that cover the nodes' demand within the
// subnet budgets, under the options' policy.
//
// Each node's demand (Pending and WarmShortfall, minus InFlight; in prefix
// mode rounded up to whole /28 prefixes) is handed out one slot (a secondary
// address or a prefix) at a time, in two rounds: first every node's waiting
// pods, then every node's warm targets. Within a round the node with the
// largest remaining deficit gets the next slot (ties: InstanceID), so when a
// budget runs short the deficits are evened out instead of the first node
// taking all. A node's slots always go to its targets in the same order
// (existing ENIs most-free first, then new ENIs at the lowest free device
// index), so the slots of both rounds end up in one AssignPrivateIpAddresses
// per existing ENI and one CreateNetworkInterface per new ENI. Every slot is
// charged to its ENI's subnet budget as it is granted (a new ENI's first slot
// also pays for the ENI's primary address); a slot no budget can pay for is
// not planned and the node's remainder is reported in Unmet.
//
// Under TimeOptimal the targets of a node that chooseShapes moved to a
// shape with more new ENIs are reordered before the rounds: those new ENIs
// come first, then its existing ENIs, so its slots land in that shape.
// Every other node is planned as under FewestCalls. The balance counts the
// demand of Options.Expected too, which gets no action: a round that plans
// the first nodes of a burst moves as many of them, in proportion, as the
// whole burst known so far needs, instead of sending all of them to the
// Assigns the full buckets would pay for. A node given a shape in
// Options.Shapes is planned in that shape under either policy. With
// Options.Balance every node takes the shape struck over the larger set it
// belongs to, and no balance is struck here. Under Naive none of this
// applies: makeNaive plans each node on its own.
//
// MakeWith is pure and deterministic: the same nodes in any order and the
// same budgets and options give the same plan. It changes neither its
// arguments nor anything they point to.
func MakeWith(nodes []Node, budgets Budgets, opt Options) Plan {
	if opt.Policy == Naive {
		return makeNaive(nodes, budgets)
	}
	p, states := newPlanning(nodes, budgets)
	if opt.Balance != nil {
		opt.Balance.apply(states)
	} else {
		balance(states, opt)
	}
	for _, s := range states {
		putNewFirst(s)
	}

	p.round(states, true)
	p.round(states, false)
	p.fill(states)
	return p.result(states)
}

// fill tops up the new ENIs of nodes that want them full with what the
// budgets have left once every demand was granted, node by node in
// deterministic order. The extra slots are no node's demand, so they never
// take budget a demand could use.
func (p *planning) fill(states []*nodeState) {
	for _, s := range states {
		if !s.node.FillNewENIs || s.mode != SecondaryIP {
			continue
		}
		for _, t := range s.targets {
			if !t.isNew || t.filled == 0 || t.filled >= t.capacity {
				continue
			}
			extra := min(int64(t.capacity-t.filled), p.budget[t.subnetID])
			if extra <= 0 {
				continue
			}
			p.budget[t.subnetID] -= extra
			t.filled += int(extra)
		}
	}
}

type planning struct {
	budget map[string]int64
	seq    int
}

// newPlanning copies the budgets for a plan to spend and returns the
// nodes' states in planning order.
func newPlanning(nodes []Node, budgets Budgets) (*planning, []*nodeState) {
	p := &planning{budget: make(map[string]int64, len(budgets))}
	for s, b := range budgets {
		p.budget[s] = b
	}
	states := make([]*nodeState, len(nodes))
	for i := range nodes {
		states[i] = newNodeState(&nodes[i], i)
	}
	sort.Slice(states, func(i, j int) bool { return states[i].less(states[j]) })
	for i, s := range states {
		s.rank = i
	}
	return p, states
}

// nodeState is one node's progress through planning.
type nodeState struct {
	node *Node
	idx  int // input position, the last tie-break
	rank int // position in planning order (less), for the rounds' heap
	mode Mode
	unit int // addresses per slot: 1, or allotv1.PrefixSize
	// urgentAddrs and totalAddrs are the demand in addresses after InFlight;
	// urgentSlots and totalSlots the same in slots.
	urgentAddrs, totalAddrs int
	urgentSlots, totalSlots int
	granted                 int // slots granted so far
	targets                 []*target
	roomForENI              bool
	// creates is how many new ENIs TimeOptimal fills before the node's
	// existing ENIs; fixed says the caller chose it (Options.Shapes).
	creates int
	fixed   bool
	blocked Reason // why the node can take no more; 0 if it can
}

func newNodeState(n *Node, idx int) *nodeState {
	s := &nodeState{node: n, idx: idx, mode: effectiveMode(n), unit: 1}
	if s.mode == Prefix {
		s.unit = allotv1.PrefixSize
	}
	inFlight := max(n.InFlight, 0)
	s.urgentAddrs = max(n.Pending-inFlight, 0)
	s.totalAddrs = max(max(n.Pending, 0)+max(n.WarmShortfall, 0)-inFlight, 0)
	s.urgentSlots = ceilDiv(s.urgentAddrs, s.unit)
	s.totalSlots = ceilDiv(s.totalAddrs, s.unit)
	s.targets, s.roomForENI = buildTargets(n)
	return s
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func (s *nodeState) less(o *nodeState) bool {
	if s.node.InstanceID != o.node.InstanceID {
		return s.node.InstanceID < o.node.InstanceID
	}
	return s.idx < o.idx
}

// wantSlots is how many slots the node wants by the end of the round.
func (s *nodeState) wantSlots(urgent bool) int {
	if urgent {
		return s.urgentSlots
	}
	return s.totalSlots
}

// deficit is the node's remaining demand in addresses for the round, the
// measure fairness compares across nodes of either mode.
func (s *nodeState) deficit(urgent bool) int {
	want := s.totalAddrs
	if urgent {
		want = s.urgentAddrs
	}
	return want - s.granted*s.unit
}

// grant gives the node one slot on its first target that has room and whose
// subnet budget can pay for it. It records why when there is none.
func (p *planning) grant(s *nodeState, urgent bool) bool {
	short := false
	for _, t := range s.targets {
		if t.filled >= t.capacity {
			continue
		}
		cost := int64(s.unit)
		if t.isNew && t.filled == 0 {
			cost++ // the new ENI's own primary address
			t.subnetID = p.newENISubnet(s.node)
		}
		if p.budget[t.subnetID] < cost {
			short = true
			continue
		}
		p.budget[t.subnetID] -= cost
		if t.filled == 0 {
			t.seq = p.seq
			p.seq++
		}
		t.filled++
		t.urgent = t.urgent || urgent
		s.granted++
		return true
	}
	switch {
	case short:
		s.blocked = BudgetExhausted
	case s.node.Busy && s.roomForENI:
		s.blocked = NodeBusy
	default:
		s.blocked = NodeFull
	}
	return false
}

// result turns the filled targets into actions, urgent ones first and
// otherwise in the order their first slot was granted, and lists what is
// left unmet.
func (p *planning) result(states []*nodeState) Plan {
	// The targets are ordered before their actions are made: a burst's
	// plan has thousands, and moving small pairs costs less than Actions.
	type planned struct {
		s *nodeState
		t *target
	}
	var all []planned
	plan := Plan{Unmet: map[string]Shortfall{}}
	for _, s := range states {
		for _, t := range s.targets {
			if t.filled > 0 {
				all = append(all, planned{s, t})
			}
		}
		if left := s.totalAddrs - s.granted*s.unit; left > 0 && s.blocked != 0 {
			plan.Unmet[s.node.InstanceID] = Shortfall{Addresses: left, Reason: s.blocked}
		}
	}
	slices.SortFunc(all, func(x, y planned) int {
		if x.t.urgent != y.t.urgent {
			if x.t.urgent {
				return -1
			}
			return 1
		}
		return cmp.Compare(x.t.seq, y.t.seq) // unique per target
	})
	if len(all) > 0 {
		plan.Actions = make([]Action, 0, len(all))
	}
	for _, x := range all {
		n, t := x.s.node, x.t
		a := Action{Kind: Assign, InstanceID: n.InstanceID, ENIID: t.eniID, SubnetID: t.subnetID,
			DeviceIndex: t.deviceIndex, Count: t.filled, Mode: x.s.mode, Urgent: t.urgent}
		if t.isNew {
			a.Kind = CreateAttach
			a.SecurityGroups = append([]string(nil), n.SecurityGroups...)
		}
		plan.Actions = append(plan.Actions, a)
	}
	return plan
}
