package executor

import (
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
)

// surplus asks the planner what to propose giving back of a node's free
// addresses. How many is the agent's to say (Usage.Excess, from its warm
// targets); a report without it proposes nothing. Which ones is the
// planner's (planner.ChooseRelease): only addresses of attached ENIs (and
// the primary) that the report lists free.
func surplus(n store.Node, enis []store.ENI, d store.Demand, u store.Usage, margin int) planner.Release {
	if !u.HasExcess || u.Excess <= 0 || d.Pending > 0 || d.WarmShortfall > 0 {
		return planner.Release{} // ChooseRelease's answer, without building its input
	}
	var held []planner.HeldENI
	for _, x := range enis {
		if x.Primary || x.Status == store.ENIAttached {
			held = append(held, heldENI(x))
		}
	}
	return planner.ChooseRelease(planner.ReleaseInput{
		Mode: mode(n.Mode), Pending: d.Pending, WarmShortfall: d.WarmShortfall, ENIs: held,
		Assigned: u.Assigned, Free: u.Free, Excess: u.Excess, Margin: margin,
	})
}

// heldENI is the planner's view of an ENI record.
func heldENI(x store.ENI) planner.HeldENI {
	return planner.HeldENI{ID: x.ID, DeviceIndex: x.DeviceIndex, Primary: x.Primary, PrimaryIP: x.PrimaryIP,
		Addresses: x.Addresses, Prefixes: x.Prefixes}
}

// surplusMemo remembers each node's surplus with the records it was worked
// out from, so a round works out again only the nodes whose node, demand,
// usage or ENI records changed since: after a burst thousands of nodes
// hold an excess for ReleaseAfter, and each round would choose the same
// addresses again for every one. Records are told apart by their etcd
// revision, a node's ENIs by their list, which the view replaces on any
// change (the memo keeps the list, so its memory is not reused for
// another).
type surplusMemo map[string]surplusMemoed

type surplusMemoed struct {
	node, demand, usage int64
	enis                []store.ENI
	r                   planner.Release
}

// surplus returns surplus(n, enis, d, u, margin), from the memo when
// nothing it depends on changed.
func (m surplusMemo) surplus(n store.Node, enis []store.ENI, d store.Demand, u store.Usage, margin int) planner.Release {
	if n.Rev == 0 || u.Rev == 0 {
		return surplus(n, enis, d, u, margin) // records not read from etcd: nothing tells them apart
	}
	was, ok := m[n.InstanceID]
	if ok && was.node == n.Rev && was.demand == d.Rev && was.usage == u.Rev && sameList(was.enis, enis) {
		return was.r
	}
	r := surplus(n, enis, d, u, margin)
	m[n.InstanceID] = surplusMemoed{node: n.Rev, demand: d.Rev, usage: u.Rev, enis: enis, r: r}
	return r
}

// sameList reports whether a and b are the same list (not equal ones).
func sameList(a, b []store.ENI) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
