package planner

import "sort"

// target is one place a node's new addresses can go: an existing ENI with
// free slots, or an ENI the plan would create at a free device index. The
// planner fills a node's targets strictly in order, so whatever a node is
// granted lands in the fewest calls.
type target struct {
	eniID       string // empty for a new ENI
	subnetID    string
	deviceIndex int
	isNew       bool
	// capacity is the slots (secondary addresses or prefixes) it can take.
	capacity int
	// filled is the slots the plan gives it.
	filled int
	// urgent is true once any of its slots serves waiting pods.
	urgent bool
	// seq orders actions by when their first slot was granted.
	seq int
}

// effectiveMode is the mode the node can actually use: prefixes only on
// types that take them (as aws-vpc-cni, a non-Nitro node falls back to
// secondary IPs rather than getting nothing).
func effectiveMode(n *Node) Mode {
	if n.Mode == Prefix && n.Limits.PrefixCapable {
		return Prefix
	}
	return SecondaryIP
}

// maxENIs is the node's ENI limit: the type's, lowered by the node's own cap.
func maxENIs(n *Node) int {
	m := n.Limits.MaxENIs
	if n.MaxENIs > 0 && n.MaxENIs < m {
		m = n.MaxENIs
	}
	return m
}

// buildTargets lists a node's targets in fill order: existing ENIs with free
// slots, most free first (the fewest Assign calls cover the demand), then new
// ENIs at the lowest free device indexes. Device index 0 is the instance's
// primary ENI and always exists, listed or not, so it is never planned and
// always counts against the ENI limit. A busy node gets no new ENIs. It also
// returns whether the node had room for a new ENI at all, to tell NodeBusy
// from NodeFull.
func buildTargets(n *Node) (targets []*target, roomForENI bool) {
	perENI := n.Limits.IPv4PerENI
	used := map[int]bool{0: true}
	for _, e := range n.ENIs {
		used[e.DeviceIndex] = true
		free := perENI - e.Slots()
		if free <= 0 || e.ID == "" || e.Closed {
			continue
		}
		subnet := e.SubnetID
		if subnet == "" {
			subnet = n.SubnetID
		}
		targets = append(targets, &target{eniID: e.ID, subnetID: subnet, deviceIndex: e.DeviceIndex, capacity: free})
	}
	sort.SliceStable(targets, func(i, j int) bool {
		a, b := targets[i], targets[j]
		if a.capacity != b.capacity {
			return a.capacity > b.capacity
		}
		if a.deviceIndex != b.deviceIndex {
			return a.deviceIndex < b.deviceIndex
		}
		return a.eniID < b.eniID
	})

	room := maxENIs(n) - len(used)
	if room <= 0 || perENI <= 1 {
		return targets, false
	}
	if n.Busy {
		return targets, true
	}
	for dev := 1; room > 0; dev++ {
		if used[dev] {
			continue
		}
		targets = append(targets, &target{subnetID: n.SubnetID, deviceIndex: dev, isNew: true, capacity: perENI - 1})
		room--
	}
	return targets, true
}
