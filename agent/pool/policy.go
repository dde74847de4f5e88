package pool

import (
	"errors"
	"fmt"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Targets are the warm-pool settings, with the meaning aws-vpc-cni gives its
// variables of the same names (pkg/ipamd/ipamd.go, datastoreTargetState,
// isDatastorePoolTooLow/TooHigh, getDeletableENI):
//
//   - WarmIPs / MinimumIPs (WARM_IP_TARGET / MINIMUM_IP_TARGET): if either is
//     set, the pool keeps WarmIPs available addresses and at least MinimumIPs
//     addresses in total, and they override WarmENIs and WarmPrefixes. In
//     prefix mode the shortfall is rounded up to whole prefixes.
//   - WarmENIs (WARM_ENI_TARGET, secondary-IP mode only): keep WarmENIs
//     ENIs' worth of available addresses; the pool grows in whole ENIs' worth
//     (IPv4PerENI-1 addresses). With 0, it grows only when nothing is
//     available.
//   - WarmPrefixes (WARM_PREFIX_TARGET, prefix mode only): grow when fewer
//     than WarmPrefixes×16 addresses are available, by at least one prefix
//     and by as many as it takes to have WarmPrefixes wholly free prefixes.
//   - MaxENIs (MAX_ENI): caps the ENIs below the instance type's limit.
//   - MaxPods: once the pool holds this many addresses it stops growing.
//
// "Available" is aws-vpc-cni's: total minus assigned, cooling addresses
// included (they come back shortly). Addresses in a release handshake are
// already gone and count nowhere.
type Targets struct {
	WarmIPs      int
	MinimumIPs   int
	WarmENIs     int
	WarmPrefixes int
	MaxENIs      int
	MaxPods      int
	// PrefixMode hands out addresses of /28 prefixes instead of secondary IPs.
	PrefixMode bool
}

// DefaultTargets are aws-vpc-cni's defaults: WARM_ENI_TARGET=1, or
// WARM_PREFIX_TARGET=1 in prefix mode.
func DefaultTargets(prefixMode bool) Targets {
	if prefixMode {
		return Targets{WarmPrefixes: 1, PrefixMode: true}
	}
	return Targets{WarmENIs: 1}
}

// Validate rejects settings that can't mean anything.
func (t Targets) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"warm IP target", t.WarmIPs}, {"minimum IP target", t.MinimumIPs}, {"warm ENI target", t.WarmENIs},
		{"warm prefix target", t.WarmPrefixes}, {"max ENIs", t.MaxENIs}, {"max pods", t.MaxPods}} {
		if f.v < 0 {
			return fmt.Errorf("%s is %d: must not be negative", f.name, f.v)
		}
	}
	if t.PrefixMode && !t.ipTargets() && t.WarmPrefixes == 0 {
		// aws-vpc-cni refuses this too: the pool would never hold a spare
		// address and every pod would wait for EC2.
		return errors.New("prefix mode needs a warm prefix target or a warm/minimum IP target")
	}
	return nil
}

func (t Targets) ipTargets() bool { return t.WarmIPs > 0 || t.MinimumIPs > 0 }

// Limits are the instance type's ENI limits.
type Limits struct {
	// MaxENIs is the most ENIs the instance can have, the primary included.
	MaxENIs int
	// IPv4PerENI is the address slots of one ENI, its primary address
	// included.
	IPv4PerENI int
}

// Stats are the pool counts the policy reads.
type Stats struct {
	ENIs int
	// Total is the pool's addresses, excluding any in a release handshake.
	Total    int
	Assigned int
	// Cooling addresses are free but not yet reusable.
	Cooling int
	// Releasing addresses were acknowledged for release.
	Releasing int
	// Prefixes is the number of /28 prefixes (releasing ones excluded);
	// FreePrefixes those with no assigned address.
	Prefixes     int
	FreePrefixes int
}

// Available is total minus assigned: what aws-vpc-cni calls available.
func (s Stats) Available() int { return s.Total - s.Assigned }

// maxENIs is the effective ENI cap.
func maxENIs(t Targets, l Limits) int {
	if t.MaxENIs > 0 && t.MaxENIs < l.MaxENIs {
		return t.MaxENIs
	}
	return l.MaxENIs
}

// perENI is how many pod addresses one full ENI holds.
func perENI(t Targets, l Limits) int {
	slots := max(l.IPv4PerENI-1, 0) // the ENI's own primary address
	if t.PrefixMode {
		return slots * allotv1.PrefixSize
	}
	return slots
}

// Capacity is the most pod addresses the node can ever hold.
func Capacity(t Targets, l Limits) int { return maxENIs(t, l) * perENI(t, l) }

// Shortfall returns how many more addresses the warm targets ask for, in
// addresses (a multiple of allotv1.PrefixSize in prefix mode), capped by what the
// node can still hold. Pods waiting right now are not part of it: they are
// reported to the broker separately, and served first.
func Shortfall(t Targets, l Limits, s Stats) int {
	if t.MaxPods > 0 && s.Total >= t.MaxPods {
		return 0
	}
	avail := s.Available()
	var need int
	switch {
	case t.ipTargets():
		short := max(t.WarmIPs-avail, 0)
		short = max(short, t.MinimumIPs-s.Total)
		if t.PrefixMode {
			short = ceilDiv(short, allotv1.PrefixSize) * allotv1.PrefixSize
		}
		need = short
	case t.PrefixMode:
		if avail < t.WarmPrefixes*allotv1.PrefixSize || (t.WarmPrefixes == 0 && avail == 0) {
			need = max(1, t.WarmPrefixes-s.FreePrefixes) * allotv1.PrefixSize
		}
	default:
		per := perENI(t, l)
		if per == 0 {
			return 0
		}
		if avail < t.WarmENIs*per || (t.WarmENIs == 0 && avail == 0) {
			deficit := max(t.WarmENIs*per-avail, 1)
			need = ceilDiv(deficit, per) * per
		}
	}
	room := max(Capacity(t, l)-s.Total-s.Releasing, 0)
	if t.PrefixMode {
		room = room / allotv1.PrefixSize * allotv1.PrefixSize
	}
	return min(need, room)
}

// Excess returns how many of the free addresses (cooling ones included)
// the warm targets do not need; the agent states it with every usage
// report, and the broker proposes releases of no more than that. What the
// targets keep free, with aws-vpc-cni's meaning: WarmIPs, and MinimumIPs
// less the assigned addresses, win over WarmENIs; in prefix mode
// WarmPrefixes whole prefixes are kept as well; WarmENIs keeps that many
// ENIs' worth, and counts the excess beyond them in whole ENIs' worth too:
// the pool grows by whole ENIs' worth under WarmENIs (Shortfall), so an
// excess of part of one would give back, minutes later, part of what the
// last growth brought, and ask for it again at the next pods (aws-vpc-cni
// never trims addresses under WARM_ENI_TARGET at all). With no target set
// (or WarmENIs with unknown limits) nothing is excess: the pool never
// shrinks on a guess.
func Excess(t Targets, l Limits, assigned, free int) int {
	keep := max(t.WarmIPs, t.MinimumIPs-assigned, 0)
	switch per := perENI(t, l); {
	case t.PrefixMode && t.WarmPrefixes > 0:
		keep = max(keep, t.WarmPrefixes*allotv1.PrefixSize)
	case t.ipTargets():
	case !t.PrefixMode && t.WarmENIs > 0 && per > 0:
		return max(free-t.WarmENIs*per, 0) / per * per
	default:
		return 0
	}
	return max(free-keep, 0)
}

func ceilDiv(a, b int) int {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}
