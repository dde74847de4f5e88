package ipamd

import (
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Warm targets as ipamd reads them (pkg/ipamd/ipamd.go at v1.23.1). Zero
// means unset for WARM_IP_TARGET and MINIMUM_IP_TARGET (noWarmIPTarget,
// noMinimumIPTarget); WARM_ENI_TARGET and WARM_PREFIX_TARGET take effect
// only when neither of those is set.

// warmIPTargetsDefined is warmIPTargetsDefined: WARM_IP_TARGET or
// MINIMUM_IP_TARGET is set.
func (n *Node) warmIPTargetsDefined() bool {
	return n.cfg.WarmIPTarget != 0 || n.cfg.MinimumIPTarget != 0
}

// targetState is datastoreTargetState for the default network card: how
// many addresses (or, with prefix delegation, prefixes) the pool is short
// of WARM_IP_TARGET / MINIMUM_IP_TARGET, and whether those are set.
func (n *Node) targetState(s stats) (short int, enabled bool) {
	if !n.warmIPTargetsDefined() {
		return 0, false
	}
	short = max(n.cfg.WarmIPTarget-s.available(), 0)
	short = max(short, n.cfg.MinimumIPTarget-s.total)
	if n.cfg.PrefixMode {
		return divCeil(short, allotv1.PrefixSize), true
	}
	return short, true
}

// tooLow is isDatastorePoolTooLow.
func (n *Node) tooLow(s stats) bool {
	if n.cfg.MaxPods > 0 && s.total >= n.cfg.MaxPods {
		return false
	}
	if short, ok := n.targetState(s); ok {
		return short > 0
	}
	warm, per := n.cfg.WarmENITarget, n.maxIPsPerENI
	if n.cfg.PrefixMode {
		warm, per = n.cfg.WarmPrefixTarget, allotv1.PrefixSize
	}
	return s.available() < per*warm || (warm == 0 && s.available() == 0)
}

// prefixesNeeded is getPrefixesNeeded: one prefix by default; with
// WARM_IP_TARGET / MINIMUM_IP_TARGET the prefixes short of them; else
// WARM_PREFIX_TARGET less the free prefixes.
func (n *Node) prefixesNeeded(s stats) int {
	if short, ok := n.targetState(s); ok {
		return max(1, short)
	}
	return max(1, n.cfg.WarmPrefixTarget-s.freePrefixes)
}

// toAssign is what one AssignPrivateIpAddresses asks for on an existing
// ENI before the ENI's room is applied (tryAssignIPs, tryAssignPrefixes):
// every free slot in secondary-IP mode unless WARM_IP_TARGET /
// MINIMUM_IP_TARGET cap it at the shortfall. ok is false when the targets
// are set and met (tryAssignIPs then adds nothing).
func (n *Node) toAssign(s stats) (count int, ok bool) {
	if n.cfg.PrefixMode {
		return n.prefixesNeeded(s), true
	}
	if short, defined := n.targetState(s); defined {
		return short, short > 0
	}
	return n.maxIPsPerENI, true
}

// toCreate is GetENIResourcesToAllocate: what a new ENI is created with.
func (n *Node) toCreate(s stats) int {
	if n.cfg.PrefixMode {
		return min(n.prefixesNeeded(s), n.maxIPsPerENI)
	}
	if short, defined := n.targetState(s); defined {
		return min(short, n.maxIPsPerENI)
	}
	return n.maxIPsPerENI
}

func divCeil(a, b int) int { return (a + b - 1) / b }
