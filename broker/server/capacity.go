package server

import (
	"fmt"
	"sort"

	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// What binds a pod headroom (allotv1.PodHeadroom.binding).
const (
	bindAddresses = "addresses"
	bindNodes     = "nodes"
	bindNone      = "none"
	bindMixed     = "mixed"
)

// hostNetworkPods is how many pods EKS's max-pods formula adds for pods on
// the host network (the agent, kube-proxy), which take no VPC address.
const hostNetworkPods = 2

// MaxPods is kubelet's max-pods for an instance type, EKS's formula: every
// ENI's address slots but its primary, times 16 in prefix mode, plus the
// host-network pods; in prefix mode capped at 110, or 250 from 30 vCPUs.
// vcpus 0 (unknown) takes the lower cap. It returns the formula in words.
func MaxPods(maxENIs, ipv4PerENI, vcpus int, prefix bool) (int64, string) {
	if maxENIs <= 0 || ipv4PerENI <= 1 {
		return 0, "the instance type has no ENI address slots for pods"
	}
	perSlot, mode := int64(1), "secondary IPs"
	if prefix {
		perSlot, mode = allotv1.PrefixSize, "/28 prefixes"
	}
	n := int64(maxENIs)*int64(ipv4PerENI-1)*perSlot + hostNetworkPods
	formula := fmt.Sprintf("%d ENIs x (%d addresses - 1) x %d (%s) + %d host-network pods", maxENIs, ipv4PerENI, perSlot, mode, hostNetworkPods)
	if prefix {
		limit := int64(110)
		if vcpus >= 30 {
			limit = 250
		}
		if n > limit {
			n = limit
			formula += fmt.Sprintf(", capped at %d for %d vCPUs", limit, vcpus)
		}
	}
	return n, formula
}

// podSlots is how many pods with VPC addresses a node can hold: its
// address slots, capped by max-pods less the host-network pods. The node
// record has no vCPU count, so prefix mode takes the 110 cap.
func podSlots(n store.Node) int64 {
	slots := maxAddresses(n)
	if slots == 0 {
		return 0
	}
	mp, _ := MaxPods(n.MaxENIs, n.IPv4PerENI, 0, n.Mode == store.ModePrefix)
	return max(min(slots, mp-hostNetworkPods), 0)
}

// podHeadroom is how many more pods fit in a subnet: the addresses allow
// addressPods; the nodes registered in it can take their free pod slots.
func podHeadroom(sn store.Subnet, addressPods int64, nodes []store.Node, usage map[string]store.Usage) *allotv1.PodHeadroom {
	h := &allotv1.PodHeadroom{AddressPods: addressPods}
	for _, n := range nodes {
		if n.SubnetID != sn.ID {
			continue
		}
		h.Nodes++
		h.NodePods += max(podSlots(n)-int64(len(usage[n.InstanceID].Assigned)), 0)
	}
	h.Pods = min(h.AddressPods, h.NodePods)
	switch {
	case h.AddressPods < h.NodePods:
		h.Binding = bindAddresses
	case h.NodePods < h.AddressPods:
		h.Binding = bindNodes
	default:
		h.Binding = bindNone
	}
	return h
}

// capacity sums the view's subnet budgets per zone and for the cluster.
func capacity(v *view) *allotv1.GetCapacityResponse {
	resp := &allotv1.GetCapacityResponse{Subnets: budgets(v), Revision: v.rev, Cluster: &allotv1.CapacityTotal{}}
	zones := map[string]*allotv1.CapacityTotal{}
	for _, b := range resp.Subnets {
		z := zones[b.GetAvailabilityZone()]
		if z == nil {
			z = &allotv1.CapacityTotal{AvailabilityZone: b.GetAvailabilityZone()}
			zones[b.GetAvailabilityZone()] = z
		}
		addToTotal(z, b)
		addToTotal(resp.Cluster, b)
	}
	names := make([]string, 0, len(zones))
	for n := range zones {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		resp.Zones = append(resp.Zones, zones[n])
	}
	return resp
}

// addToTotal adds one subnet's figures to a total.
func addToTotal(t *allotv1.CapacityTotal, b *allotv1.SubnetBudget) {
	t.Subnets++
	t.Usable += b.GetUsable()
	t.Limit += b.GetLimit()
	t.Attached += b.GetAttached()
	t.Assigned += b.GetAssigned()
	t.Warm += b.GetWarm()
	t.Reserved += b.GetReserved()
	t.UsedByOthers += b.GetUsedByOthers()
	t.Headroom += b.GetHeadroom()
	t.Available += b.GetAvailable()
	t.HeadroomPods += b.GetHeadroomPods()
	p := b.GetPods()
	if t.Pods == nil {
		t.Pods = &allotv1.PodHeadroom{Binding: p.GetBinding()}
	} else if t.Pods.Binding != p.GetBinding() {
		t.Pods.Binding = bindMixed
	}
	t.Pods.Pods += p.GetPods()
	t.Pods.AddressPods += p.GetAddressPods()
	t.Pods.NodePods += p.GetNodePods()
	t.Pods.Nodes += p.GetNodes()
}
