package burst

import (
	"slices"

	"github.com/allotnet/allot/agent/pool"
	"github.com/allotnet/allot/awssim/world"
)

// releaseMargin is the broker's default ReleaseMargin: a node may hold
// this many free addresses beyond what its warm targets keep before any
// are taken back, so a node within it is back at its warm targets too.
const releaseMargin = 4

// heldENI is one attached ENI as the minimum reads it: whether it is the
// node's primary (never detached) and how many secondary addresses it
// holds.
type heldENI struct {
	primary bool
	addrs   int
}

// releaseCalls are the calls of one way to release.
type releaseCalls struct{ unassign, whole int }

func (c releaseCalls) total() int { return c.unassign + 2*c.whole }

// releaseMinimum is the fewest EC2 calls that take a node with no pods
// from the addresses its ENIs hold down to its warm targets, given its ENI
// layout. The end state is the one the warm targets describe and the broker
// aims at: exactly keep addresses (the agent states all the rest as excess),
// on the primary ENI and the fewest secondary ENIs whose addresses cover
// keep, the others given up. An ENI given up costs a
// DetachNetworkInterface and a DeleteNetworkInterface and no
// UnassignPrivateIpAddresses (deleting an ENI frees its addresses); the
// surplus of the ENIs that stay costs one Unassign per ENI it is taken
// from, fullest first. Of the sets of ENIs that could stay (at most 2^14
// on any instance type) the one needing fewest Unassigns wins. Without
// the layout rule fewer calls would do (unassigning everything and keeping
// empty ENIs attached), but an attached ENI holds a subnet address and one
// of the instance's ENI slots whatever it carries; neither the broker nor
// aws-vpc-cni keeps an empty one. Nothing is released when the node holds
// no more than keep+margin.
func releaseMinimum(enis []heldENI, keep, margin int) releaseCalls {
	var sec []int
	total, base := 0, 0
	for _, e := range enis {
		total += e.addrs
		if e.primary {
			base += e.addrs
		} else {
			sec = append(sec, e.addrs)
		}
	}
	if total <= keep+margin || len(sec) > 20 {
		return releaseCalls{}
	}
	var best releaseCalls
	bestKept, found := 0, false
	for set := 0; set < 1<<len(sec); set++ {
		held, stay := base, []int{base}
		for i, n := range sec {
			if set&(1<<i) != 0 {
				held += n
				stay = append(stay, n)
			}
		}
		if held < keep {
			continue
		}
		kept := len(stay) - 1
		c := releaseCalls{whole: len(sec) - kept, unassign: unassignsFor(stay, held-keep)}
		if !found || kept < bestKept || (kept == bestKept && c.unassign < best.unassign) {
			best, bestKept, found = c, kept, true
		}
	}
	return best
}

// unassignsFor is how many ENIs, fullest first, must give addresses to
// take back need of them.
func unassignsFor(stay []int, need int) int {
	if need <= 0 {
		return 0
	}
	s := slices.Clone(stay)
	slices.Sort(s)
	k := 0
	for i := len(s) - 1; i >= 0 && need > 0; i-- {
		need -= s[i]
		k++
	}
	return k
}

// downMinimum sums releaseMinimum over every node with no pods, from the
// ENIs EC2 holds, the keep being what the agent's own pool.Excess leaves of
// a node's addresses; by action name.
func downMinimum(t pool.Targets, l pool.Limits, enis []world.NetworkInterface) map[string]int {
	byNode := map[string][]heldENI{}
	for _, e := range enis {
		if e.Attachment == nil {
			continue
		}
		id := e.Attachment.InstanceID
		byNode[id] = append(byNode[id], heldENI{primary: e.Attachment.DeviceIndex == 0, addrs: len(e.SecondaryIPs)})
	}
	out := map[string]int{}
	for _, held := range byNode {
		total := 0
		for _, h := range held {
			total += h.addrs
		}
		keep := total - pool.Excess(t, l, 0, total)
		c := releaseMinimum(held, keep, releaseMargin)
		if c.unassign > 0 {
			out["UnassignPrivateIpAddresses"] += c.unassign
		}
		if c.whole > 0 {
			out["DetachNetworkInterface"] += c.whole
			out["DeleteNetworkInterface"] += c.whole
		}
	}
	return out
}
