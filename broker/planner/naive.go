package planner

import "sort"

// makeNaive plans as a simple central allocator does that serves every
// node's request by itself (Naive): nodes in InstanceID order, each given
// all it asks for before the next is looked at. A node's demand goes to its
// ENIs first fit, in device-index order, one AssignPrivateIpAddresses per
// ENI it touches. When they have no room left it gets one new ENI, created
// empty and attached; that ENI is filled by an Assign in a later plan, once
// it is attached (a node with an ENI on its way is Busy and gets nothing
// more meanwhile). There is no cluster-wide mix of Assigns and new ENIs, no
// pre-filled ENI, and no evening out of deficits when a budget runs short:
// the first nodes take what there is.
func makeNaive(nodes []Node, budgets Budgets) Plan {
	p, states := newPlanning(nodes, budgets)
	plan := Plan{Unmet: map[string]Shortfall{}}
	var later []Action // actions for warm targets only, after every urgent one
	for _, s := range states {
		acts, left, why := p.naiveNode(s)
		for _, a := range acts {
			if a.Urgent {
				plan.Actions = append(plan.Actions, a)
			} else {
				later = append(later, a)
			}
		}
		if left > 0 {
			plan.Unmet[s.node.InstanceID] = Shortfall{Addresses: left * s.unit, Reason: why}
		}
	}
	plan.Actions = append(plan.Actions, later...)
	return plan
}

// naiveNode plans one node's whole demand on its own. It returns the
// actions, the slots left unmet and why.
func (p *planning) naiveNode(s *nodeState) ([]Action, int, Reason) {
	n := s.node
	want := s.totalSlots
	if want <= 0 {
		return nil, 0, 0
	}
	urgent := s.urgentSlots > 0
	fresh, existing := splitNew(s.targets)
	sort.SliceStable(existing, func(i, j int) bool { return existing[i].deviceIndex < existing[j].deviceIndex })
	var acts []Action
	short := false
	for _, t := range existing {
		if want == 0 {
			break
		}
		k := int64(min(t.capacity, want))
		k = min(k, p.budget[t.subnetID]/int64(s.unit))
		if k <= 0 {
			short = true
			continue
		}
		p.budget[t.subnetID] -= k * int64(s.unit)
		want -= int(k)
		acts = append(acts, Action{Kind: Assign, InstanceID: n.InstanceID, ENIID: t.eniID, SubnetID: t.subnetID,
			DeviceIndex: t.deviceIndex, Count: int(k), Mode: s.mode, Urgent: urgent})
	}
	switch {
	case want == 0:
		return acts, 0, 0
	case short:
		return acts, want, BudgetExhausted
	case len(fresh) == 0 && n.Busy && s.roomForENI:
		return acts, want, NodeBusy
	case len(fresh) == 0:
		return acts, want, NodeFull
	}
	subnet := p.newENISubnet(n)
	if p.budget[subnet] < 1 {
		return acts, want, BudgetExhausted
	}
	p.budget[subnet]-- // the new ENI's own primary address
	acts = append(acts, Action{Kind: CreateAttach, InstanceID: n.InstanceID, SubnetID: subnet,
		SecurityGroups: append([]string(nil), n.SecurityGroups...), DeviceIndex: fresh[0].deviceIndex,
		Mode: s.mode, Urgent: urgent})
	// The rest waits for the new ENI: the node is busy until it is attached.
	return acts, want, NodeBusy
}
