package executor

import (
	"net/netip"
	"sort"

	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
)

// Proposal is what a node could give back: free secondary addresses, or
// whole free /28 prefixes, of one ENI.
type Proposal struct {
	ENIID     string
	Addresses []string
	Prefixes  []string
}

// Empty reports whether the proposal gives nothing back.
func (p Proposal) Empty() bool { return len(p.Addresses)+len(p.Prefixes) == 0 }

// Surplus decides which of a node's free addresses exceed its warm targets
// by more than margin, from the agent's own report u. Only addresses the
// agent reported free and not assigned are candidates; a node with no warm
// target set gives nothing back. It proposes from one ENI at a time,
// preferring the ENI with the fewest pods so it can be emptied and removed.
// In prefix mode only whole prefixes whose 16 addresses are all reported
// free are proposed.
func Surplus(n store.Node, enis []store.ENI, u store.Usage, margin int) Proposal {
	assigned := set(u.Assigned)
	// Free addresses count only if they are still the node's: a report
	// older than a finished release still lists what it gave back.
	owned := onENIs(enis)
	free := map[string]bool{}
	for _, a := range u.Free {
		if !assigned[a] && owned(a) {
			free[a] = true
		}
	}
	keep, ok := keepFree(n, len(assigned))
	if !ok {
		return Proposal{}
	}
	excess := len(free) - keep
	if excess <= margin {
		return Proposal{}
	}
	type cand struct {
		eni      store.ENI
		pods     int
		give     []string
		prefixes bool
	}
	var cands []cand
	prefixMode := mode(n.Mode) == planner.Prefix
	for _, x := range enis {
		if !x.Primary && x.Status != store.ENIAttached {
			continue
		}
		c := cand{eni: x, prefixes: prefixMode}
		for _, a := range x.Addresses {
			if assigned[a] {
				c.pods++
			} else if free[a] && !prefixMode {
				c.give = append(c.give, a)
			}
		}
		for _, p := range x.Prefixes {
			used, allFree := prefixUse(p, assigned, free)
			c.pods += used
			if prefixMode && used == 0 && allFree {
				c.give = append(c.give, p)
			}
		}
		if len(c.give) > 0 {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return Proposal{}
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.eni.Primary != b.eni.Primary {
			return !a.eni.Primary
		}
		if a.pods != b.pods {
			return a.pods < b.pods
		}
		if len(a.give) != len(b.give) {
			return len(a.give) > len(b.give)
		}
		return a.eni.DeviceIndex > b.eni.DeviceIndex
	})
	best := cands[0]
	sort.Strings(best.give)
	p := Proposal{ENIID: best.eni.ID}
	if prefixMode {
		k := min(len(best.give), excess/planner.PrefixSize)
		if k == 0 {
			return Proposal{}
		}
		p.Prefixes = best.give[:k]
		return p
	}
	p.Addresses = best.give[:min(len(best.give), excess)]
	return p
}

// keepFree is how many free addresses the node's warm targets ask to keep,
// with aws-vpc-cni's meaning: WARM_IP_TARGET and MINIMUM_IP_TARGET win over
// WARM_ENI_TARGET; WARM_PREFIX_TARGET counts whole prefixes. ok is false
// when no target is set: then nothing is surplus.
func keepFree(n store.Node, assigned int) (int, bool) {
	ipTargets := n.WarmIPTarget > 0 || n.MinimumIPTarget > 0
	k := max(n.WarmIPTarget, n.MinimumIPTarget-assigned, 0)
	if mode(n.Mode) == planner.Prefix {
		if n.WarmPrefixTarget > 0 {
			k = max(k, n.WarmPrefixTarget*planner.PrefixSize)
			return k, true
		}
		return k, ipTargets
	}
	if ipTargets {
		return k, true
	}
	if n.WarmENITarget > 0 && n.IPv4PerENI > 1 {
		return n.WarmENITarget * (n.IPv4PerENI - 1), true
	}
	return 0, false
}

// prefixUse counts the prefix's addresses held by pods and says whether
// all of its addresses are reported free.
func prefixUse(prefix string, assigned, free map[string]bool) (used int, allFree bool) {
	p, err := netip.ParsePrefix(prefix)
	if err != nil {
		return 1, false // unreadable: never give it back
	}
	allFree = true
	a := p.Masked().Addr()
	for i := 0; i < 1<<(a.BitLen()-p.Bits()) && p.Contains(a); i++ {
		s := a.String()
		if assigned[s] {
			used++
		}
		if !free[s] {
			allFree = false
		}
		a = a.Next()
	}
	return used, allFree
}

// onENIs returns a test of whether an address is a secondary address of,
// or inside a prefix delegated to, one of the ENIs.
func onENIs(enis []store.ENI) func(string) bool {
	addrs := map[string]bool{}
	var prefixes []netip.Prefix
	for _, x := range enis {
		for _, a := range x.Addresses {
			addrs[a] = true
		}
		for _, p := range x.Prefixes {
			if pp, err := netip.ParsePrefix(p); err == nil {
				prefixes = append(prefixes, pp)
			}
		}
	}
	return func(a string) bool {
		if addrs[a] {
			return true
		}
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return false
		}
		for _, p := range prefixes {
			if p.Contains(ip) {
				return true
			}
		}
		return false
	}
}

func set(l []string) map[string]bool {
	m := make(map[string]bool, len(l))
	for _, s := range l {
		m[s] = true
	}
	return m
}
