package pool

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/allotnet/allot/agent/checkpoint"
)

// ENIView is the policy's read-only view of one ENI and its pool addresses.
type ENIView struct {
	ID          string
	DeviceIndex int
	Primary     bool
	Addrs       []AddrView
}

// AddrView is one pool address as the policy sees it.
type AddrView struct {
	Addr netip.Addr
	// Prefix is the /28 the address comes from; zero for a secondary IP.
	Prefix netip.Prefix
	State  checkpoint.AddressState
}

// Release is what Excess proposes to give back.
type Release struct {
	// ENIs are released whole (detached and deleted with all their
	// addresses); their addresses are not repeated below.
	ENIs []string
	// Addresses are secondary IPs and Prefixes are /28s to unassign from
	// ENIs that stay.
	Addresses []netip.Addr
	Prefixes  []netip.Prefix
}

// Empty reports whether r releases nothing.
func (r Release) Empty() bool {
	return len(r.ENIs) == 0 && len(r.Addresses) == 0 && len(r.Prefixes) == 0
}

// StatsOf counts a pool view.
func StatsOf(enis []ENIView) Stats {
	var s Stats
	for _, e := range enis {
		s = s.plus(eniStats(e))
	}
	return s
}

func (s Stats) plus(o Stats) Stats {
	return Stats{
		ENIs: s.ENIs + o.ENIs, Total: s.Total + o.Total, Assigned: s.Assigned + o.Assigned,
		Cooling: s.Cooling + o.Cooling, Releasing: s.Releasing + o.Releasing,
		Prefixes: s.Prefixes + o.Prefixes, FreePrefixes: s.FreePrefixes + o.FreePrefixes,
	}
}

func (s Stats) minus(o Stats) Stats {
	return Stats{
		ENIs: s.ENIs - o.ENIs, Total: s.Total - o.Total, Assigned: s.Assigned - o.Assigned,
		Cooling: s.Cooling - o.Cooling, Releasing: s.Releasing - o.Releasing,
		Prefixes: s.Prefixes - o.Prefixes, FreePrefixes: s.FreePrefixes - o.FreePrefixes,
	}
}

func eniStats(e ENIView) Stats {
	s := Stats{ENIs: 1}
	type pstat struct{ assigned, releasing bool }
	prefixes := map[netip.Prefix]*pstat{}
	for _, a := range e.Addrs {
		if a.Prefix.IsValid() {
			p := prefixes[a.Prefix]
			if p == nil {
				p = &pstat{}
				prefixes[a.Prefix] = p
			}
			p.assigned = p.assigned || a.State == checkpoint.Assigned
			p.releasing = p.releasing || a.State == checkpoint.Releasing
		}
		switch a.State {
		case checkpoint.Releasing:
			s.Releasing++
			continue
		case checkpoint.Assigned:
			s.Assigned++
		case checkpoint.Cooling:
			s.Cooling++
		}
		s.Total++
	}
	for _, p := range prefixes {
		if p.releasing {
			continue
		}
		s.Prefixes++
		if !p.assigned {
			s.FreePrefixes++
		}
	}
	return s
}

// Excess chooses what to give back so the pool keeps its warm targets and no
// more, the way aws-vpc-cni's decreaseDatastorePool and getDeletableENI
// judge it. It prefers whole ENIs (a non-primary ENI whose every address is
// free, most recently attached first; each kept if removing it would break a
// target), then whole prefixes or single addresses, from non-primary ENIs
// with the fewest assigned addresses first, so that partly used ENIs drain
// and can go whole later. It never
// proposes an assigned, cooling or already releasing address, nor a prefix
// holding one. With only WarmENIs set it frees whole ENIs only, and only
// while (WarmENIs+1) ENIs' worth of addresses are available, as aws-vpc-cni
// does.
func Excess(t Targets, l Limits, enis []ENIView) Release {
	var r Release
	s := StatsOf(enis)
	released := map[string]bool{}

	// Whole ENIs, newest first.
	cands := slices.Clone(enis)
	slices.SortFunc(cands, func(a, b ENIView) int {
		return cmp.Or(cmp.Compare(b.DeviceIndex, a.DeviceIndex), cmp.Compare(a.ID, b.ID))
	})
	for _, e := range cands {
		if e.Primary || !allFree(e.Addrs) {
			continue
		}
		es := eniStats(e)
		after := s.minus(es)
		if !canDropENI(t, l, s, after) {
			continue
		}
		r.ENIs = append(r.ENIs, e.ID)
		released[e.ID] = true
		s = after
	}

	over := overTarget(t, s)
	if over == 0 {
		return r
	}
	// Drain order: non-primary ENIs first (only they can later go whole),
	// the least used first, the newest first.
	rest := make([]ENIView, 0, len(enis))
	for _, e := range enis {
		if !released[e.ID] {
			rest = append(rest, e)
		}
	}
	slices.SortFunc(rest, func(a, b ENIView) int {
		return cmp.Or(
			boolCmp(a.Primary, b.Primary),
			cmp.Compare(eniStats(a).Assigned, eniStats(b).Assigned),
			cmp.Compare(b.DeviceIndex, a.DeviceIndex),
			cmp.Compare(a.ID, b.ID))
	})
	for _, e := range rest {
		if over == 0 {
			break
		}
		if t.PrefixMode {
			for _, p := range freePrefixes(e.Addrs) {
				if over == 0 {
					break
				}
				r.Prefixes = append(r.Prefixes, p)
				over--
			}
			continue
		}
		addrs := freeSecondaries(e.Addrs)
		for i := len(addrs) - 1; i >= 0 && over > 0; i-- { // highest first
			r.Addresses = append(r.Addresses, addrs[i])
			over--
		}
	}
	return r
}

// canDropENI reports whether an ENI's worth of free addresses may go: before
// is the pool with it, after without it.
func canDropENI(t Targets, l Limits, before, after Stats) bool {
	switch {
	case t.ipTargets():
		warm, minimum := t.WarmIPs, t.MinimumIPs
		if t.PrefixMode {
			warm = ceilDiv(warm, PrefixSize) * PrefixSize
			minimum = ceilDiv(minimum, PrefixSize) * PrefixSize
		}
		return after.Available() >= warm && after.Total >= minimum
	case t.PrefixMode:
		return after.FreePrefixes >= t.WarmPrefixes && after.Available() > 0
	default:
		per := perENI(t, l)
		return per > 0 && before.Available() >= (t.WarmENIs+1)*per
	}
}

func allFree(addrs []AddrView) bool {
	for _, a := range addrs {
		if a.State != checkpoint.Free {
			return false
		}
	}
	return true
}

// freePrefixes returns the ENI's prefixes whose every address is free,
// in address order.
func freePrefixes(addrs []AddrView) []netip.Prefix {
	ok := map[netip.Prefix]bool{}
	for _, a := range addrs {
		if !a.Prefix.IsValid() {
			continue
		}
		if _, seen := ok[a.Prefix]; !seen {
			ok[a.Prefix] = true
		}
		if a.State != checkpoint.Free {
			ok[a.Prefix] = false
		}
	}
	var out []netip.Prefix
	for p, free := range ok {
		if free {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

// freeSecondaries returns the ENI's free secondary IPs in address order.
func freeSecondaries(addrs []AddrView) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if !a.Prefix.IsValid() && a.State == checkpoint.Free {
			out = append(out, a.Addr)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
