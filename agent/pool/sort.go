package pool

import (
	"cmp"
	"net/netip"
	"slices"
)

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
