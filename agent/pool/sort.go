package pool

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/allotnet/allot/agent/checkpoint"
)

// sortState puts a snapshot in the order sortedENIs, sortedAddrs and
// sortedAllocs give.
func sortState(st *checkpoint.State) {
	slices.SortFunc(st.ENIs, func(a, b checkpoint.ENI) int {
		return cmp.Or(cmp.Compare(a.DeviceIndex, b.DeviceIndex), cmp.Compare(a.ID, b.ID))
	})
	slices.SortFunc(st.Addresses, func(a, b checkpoint.Address) int { return a.Addr.Compare(b.Addr) })
	slices.SortFunc(st.Allocations, func(a, b checkpoint.Allocation) int {
		return Key{a.Network, a.ContainerID, a.IfName}.compare(Key{b.Network, b.ContainerID, b.IfName})
	})
}

func sortedENIs(m map[string]*ENI) []*ENI {
	out := make([]*ENI, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *ENI) int {
		return cmp.Or(cmp.Compare(a.DeviceIndex, b.DeviceIndex), cmp.Compare(a.ID, b.ID))
	})
	return out
}

func sortedAddrs(m map[netip.Addr]*addrRec) []*addrRec {
	out := make([]*addrRec, 0, len(m))
	for _, a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *addrRec) int { return a.addr.Compare(b.addr) })
	return out
}

func sortedAllocs(m map[Key]*Allocation) []*Allocation {
	out := make([]*Allocation, 0, len(m))
	for _, a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *Allocation) int { return a.Key.compare(b.Key) })
	return out
}
