package server

import (
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// addrUnit is how many pod addresses one ENI address slot yields for a node.
func addrUnit(n store.Node) int64 {
	if n.Mode == store.ModePrefix {
		return allotv1.PrefixSize
	}
	return 1
}

// maxAddresses is how many pod addresses a node can ever hold: every slot of
// every ENI but each ENI's own primary address.
func maxAddresses(n store.Node) int64 {
	if n.MaxENIs <= 0 || n.IPv4PerENI <= 1 {
		return 0
	}
	return int64(n.MaxENIs) * int64(n.IPv4PerENI-1) * addrUnit(n)
}

// Figures computes one subnet's budget as BudgetService reports it, from the
// subnet record (limit, attached and reserved are the store's transactional
// counters) and the nodes, ENIs and usage reports of the cluster (records of
// other subnets are ignored). It is pure.
//
// assigned and warm count only reported addresses that lie on the reporting
// node's own ENIs in this subnet. headroom_pods is warm, plus what available
// still buys: free slots of existing ENIs first (no new primary address
// needed), then new ENIs shaped like the smallest-yield node registered in
// the subnet, each costing one primary address. With no such node the
// primaries cannot be known and available counts in full. The ENIs in
// closed (by ID: primaries a pod network keeps pods off, podnet.AtHome)
// offer no free slot: their addresses still count as assigned or warm.
func Figures(sn store.Subnet, nodes []store.Node, enis []store.ENI, usage map[string]store.Usage, closed map[string]bool) *allotv1.SubnetBudget {
	b := &allotv1.SubnetBudget{
		SubnetId:         sn.ID,
		Cidr:             sn.CIDR,
		AvailabilityZone: sn.AvailabilityZone,
		Usable:           sn.Usable,
		Headroom:         sn.Headroom,
		Cap:              sn.Cap,
		Limit:            sn.Limit(),
		Attached:         sn.Attached,
		Reserved:         sn.Reserved,
		UsedByOthers:     sn.UsedByOthers,
		Available:        sn.Available(),
	}
	nodeBy := make(map[string]store.Node, len(nodes))
	for _, n := range nodes {
		nodeBy[n.InstanceID] = n
	}
	var local []store.ENI
	for _, e := range enis {
		if e.SubnetID == sn.ID && e.Status != store.ENIDetached {
			local = append(local, e)
		}
	}
	byNode := map[string][]store.ENI{}
	for _, e := range local {
		byNode[e.InstanceID] = append(byNode[e.InstanceID], e)
	}
	for id, es := range byNode {
		u, ok := usage[id]
		if !ok {
			continue
		}
		ix := newAddrIndex(es)
		for _, a := range u.Assigned {
			if _, ok := ix.owner(a); ok {
				b.Assigned++
			}
		}
		for _, a := range u.Free {
			if _, ok := ix.owner(a); ok {
				b.Warm++
			}
		}
	}
	b.HeadroomPods = b.Warm + podsFromAvailable(sn, nodeBy, local, closed)
	b.Pods = podHeadroom(sn, b.HeadroomPods, nodes, usage)
	return b
}

// podsFromAvailable is how many pod addresses the subnet's available
// addresses can become, after ENI primaries.
func podsFromAvailable(sn store.Subnet, nodeBy map[string]store.Node, local []store.ENI, closed map[string]bool) int64 {
	avail := sn.Available()
	// Free slots on ENIs that exist and take pods: one-address slots, then
	// /28 slots.
	var spare1, spare16 int64
	for _, e := range local {
		n, ok := nodeBy[e.InstanceID]
		if !ok || n.IPv4PerENI <= 1 || closed[e.ID] {
			continue
		}
		free := int64(n.IPv4PerENI - 1 - len(e.Addresses) - len(e.Prefixes))
		if free <= 0 {
			continue
		}
		if addrUnit(n) == 1 {
			spare1 += free
		} else {
			spare16 += free
		}
	}
	pods := min(avail, spare1)
	avail -= pods
	f16 := min(avail/allotv1.PrefixSize, spare16) * allotv1.PrefixSize
	pods += f16
	avail -= f16

	// New ENIs, shaped like the node that gets the fewest pods per ENI.
	var yield, unit int64
	for _, n := range nodeBy {
		if n.SubnetID != sn.ID || n.IPv4PerENI <= 1 {
			continue
		}
		y, u := int64(n.IPv4PerENI-1)*addrUnit(n), addrUnit(n)
		// Ties go to the coarser unit, which wastes more of a remainder.
		if yield == 0 || y < yield || (y == yield && u > unit) {
			yield, unit = y, u
		}
	}
	if yield == 0 {
		return pods + avail
	}
	cost := yield + 1
	pods += avail / cost * yield
	if r := avail % cost; r > unit {
		pods += (r - 1) / unit * unit
	}
	return pods
}
