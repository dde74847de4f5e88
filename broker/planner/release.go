package planner

import (
	"cmp"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"net/netip"
	"slices"
)

// HeldENI is one of a node's attached ENIs with the addresses the broker
// records on it, as release choice reads it.
type HeldENI struct {
	ID          string
	DeviceIndex int
	Primary     bool
	// PrimaryIP is the ENI's own address.
	PrimaryIP string
	Addresses []string
	Prefixes  []string
}

// ReleaseInput is what release choice reads of one node.
type ReleaseInput struct {
	Mode Mode
	// Pending and WarmShortfall are the node's demand: a node that asks
	// for addresses gives none back.
	Pending, WarmShortfall int
	ENIs                   []HeldENI
	// Assigned and Free are the agent's latest usage report; Excess is how
	// many of Free it states its warm targets do not need. The agent owns
	// that judgement; the broker only chooses which addresses.
	Assigned, Free []string
	Excess         int
	// Margin is how much excess is tolerated before anything is proposed,
	// so a node that hovers around its targets does not churn.
	Margin int
}

// Release is a proposal to give back addresses of one ENI: free secondary
// addresses, or whole free /28 prefixes.
type Release struct {
	ENIID     string
	Addresses []string
	Prefixes  []string
}

// Empty reports whether the release gives nothing back.
func (r Release) Empty() bool { return len(r.Addresses)+len(r.Prefixes) == 0 }

// ChooseRelease picks what to propose giving back of a node's free
// addresses, given the excess the agent states. Only addresses reported
// free, not reported held and still on one of the ENIs are candidates; free
// addresses of the report that are not candidates come off the stated
// excess (the agent counted them, but a stale report can list what a
// finished release took, and an address reported both ways is kept). Beyond
// that the excess must exceed Margin, except for a secondary ENI without
// pods whose every address is free and within the excess: it goes whole
// (a node that scaled down slowly, giving back part of an ENI while pods
// still held the rest, would otherwise keep that remainder on an ENI of
// its own). It proposes from one ENI at a time,
// preferring a secondary ENI, then the one with the fewest pods so it can
// be emptied and detached, then the one with the most to give, then the
// newest. In prefix mode only whole prefixes whose 16 addresses are all
// reported free are proposed.
func ChooseRelease(in ReleaseInput) Release {
	if in.Pending > 0 || in.WarmShortfall > 0 || in.Excess <= 0 {
		return Release{}
	}
	assigned := stringSet(in.Assigned)
	owned := onENIs(in.ENIs)
	free := map[string]bool{}
	for _, a := range in.Free {
		if !assigned[a] && owned(a) {
			free[a] = true
		}
	}
	excess := in.Excess - (len(in.Free) - len(free))
	if excess <= 0 {
		return Release{}
	}
	cands := releaseCandidates(in.Mode, in.ENIs, assigned, free)
	if excess <= in.Margin {
		// Within the margin only an idle secondary ENI the excess covers
		// whole goes, so a node's pools end on the fewest ENIs.
		cands = slices.DeleteFunc(cands, func(c candidate) bool { return !c.idle || c.slots(in.Mode) > excess })
	}
	if len(cands) == 0 {
		return Release{}
	}
	best := slices.MinFunc(cands, func(a, b candidate) int {
		return cmp.Or(boolFirst(!a.eni.Primary, !b.eni.Primary), cmp.Compare(a.pods, b.pods),
			cmp.Compare(len(b.give), len(a.give)), cmp.Compare(b.eni.DeviceIndex, a.eni.DeviceIndex))
	})
	slices.Sort(best.give)
	r := Release{ENIID: best.eni.ID}
	if in.Mode == Prefix {
		k := min(len(best.give), excess/allotv1.PrefixSize)
		if k == 0 {
			return Release{}
		}
		r.Prefixes = best.give[:k]
		return r
	}
	r.Addresses = best.give[:min(len(best.give), excess)]
	return r
}

// candidate is an ENI with something to give back.
type candidate struct {
	eni  HeldENI
	pods int
	give []string
	// idle says it is a secondary ENI without pods whose every address
	// (or prefix) is in give: it can be given up whole.
	idle bool
}

// slots is how many addresses give holds.
func (c candidate) slots(mode Mode) int {
	if mode == Prefix {
		return len(c.give) * allotv1.PrefixSize
	}
	return len(c.give)
}

func releaseCandidates(mode Mode, enis []HeldENI, assigned, free map[string]bool) []candidate {
	var cands []candidate
	for _, x := range enis {
		c := candidate{eni: x}
		for _, a := range x.Addresses {
			if assigned[a] {
				c.pods++
			} else if free[a] && mode != Prefix {
				c.give = append(c.give, a)
			}
		}
		for _, p := range x.Prefixes {
			used, allFree := prefixUse(p, assigned, free)
			c.pods += used
			if mode == Prefix && used == 0 && allFree {
				c.give = append(c.give, p)
			}
		}
		if len(c.give) > 0 {
			c.idle = !x.Primary && c.pods == 0 && len(c.give) == len(x.Addresses)+len(x.Prefixes)
			cands = append(cands, c)
		}
	}
	return cands
}

// Unassign is what carrying out an acknowledged release takes back.
type Unassign struct {
	// Addresses and Prefixes are to be unassigned from the ENI.
	Addresses, Prefixes []string
	// Held are acknowledged addresses and prefixes the latest usage report
	// says a pod holds: kept, since a contradiction is resolved towards
	// keeping.
	Held []string
	// Whole says the release takes every address and prefix the ENI
	// carries, no pod holds one (nor the ENI's own address), and the ENI is
	// not the primary: it is given up whole, detached and deleted, and the
	// delete frees its addresses without an Unassign.
	Whole bool
}

// CarryOut decides what of an acknowledged release to take back from eni:
// only acknowledged addresses and prefixes still on it, minus any the
// agent's latest report says a pod holds. Nothing else is ever taken: an
// address on the ENI that the release does not cover keeps the ENI.
func CarryOut(ackedAddrs, ackedPrefixes []string, eni HeldENI, assigned []string) Unassign {
	held := stringSet(assigned)
	onENI, onENIP := stringSet(eni.Addresses), stringSet(eni.Prefixes)
	var u Unassign
	for _, a := range ackedAddrs {
		switch {
		case held[a]:
			u.Held = append(u.Held, a)
		case onENI[a]:
			u.Addresses = append(u.Addresses, a)
		}
	}
	for _, p := range ackedPrefixes {
		switch used, _ := prefixUse(p, held, nil); {
		case used > 0:
			u.Held = append(u.Held, p)
		case onENIP[p]:
			u.Prefixes = append(u.Prefixes, p)
		}
	}
	gone := stringSet(append(slices.Clone(u.Addresses), u.Prefixes...))
	left := slices.ContainsFunc(eni.Addresses, func(a string) bool { return !gone[a] }) ||
		slices.ContainsFunc(eni.Prefixes, func(p string) bool { return !gone[p] })
	u.Whole = !eni.Primary && !left && len(u.Held) == 0 && !held[eni.PrimaryIP]
	return u
}

// prefixUse counts the prefix's addresses held by pods and says whether
// all of its addresses are in free.
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
func onENIs(enis []HeldENI) func(string) bool {
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
		return slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(ip) })
	}
}

func stringSet(l []string) map[string]bool {
	m := make(map[string]bool, len(l))
	for _, s := range l {
		m[s] = true
	}
	return m
}

// boolFirst orders true before false.
func boolFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}
