package cluster

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/allotnet/allot/agent/hostnet"
	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/internal/netnstest"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// ENIView is one ENI as a source of truth (EC2 or the broker) has it.
type ENIView struct {
	ID          string
	DeviceIndex int
	Primary     bool
	// Addresses are the secondary addresses and prefixes, sorted.
	Addresses []string
}

// poolSize is how many pod addresses the ENI holds: secondary addresses,
// and 16 per prefix.
func (e ENIView) poolSize() int {
	n := 0
	for _, a := range e.Addresses {
		if strings.Contains(a, "/") {
			n += allotv1.PrefixSize
		} else {
			n++
		}
	}
	return n
}

// NodeFootprint is what one node holds.
type NodeFootprint struct {
	ENIs []ENIView
	// Addresses is the pod addresses of all its ENIs.
	Addresses int
}

func footprint(enis []ENIView) NodeFootprint {
	slices.SortFunc(enis, func(a, b ENIView) int { return strings.Compare(a.ID, b.ID) })
	f := NodeFootprint{ENIs: enis}
	for _, e := range enis {
		f.Addresses += e.poolSize()
	}
	return f
}

// EC2Footprint is what awssim (EC2's truth) has attached to each live node,
// by instance ID.
func (c *Cluster) EC2Footprint() map[string]NodeFootprint {
	out := map[string]NodeFootprint{}
	for _, n := range c.liveNodes() {
		inst, ok := c.Sim.World().Instance(n.InstanceID)
		if !ok {
			continue
		}
		var enis []ENIView
		for _, e := range inst.NetworkInterfaces {
			enis = append(enis, ec2View(e))
		}
		out[n.InstanceID] = footprint(enis)
	}
	return out
}

func ec2View(e world.NetworkInterface) ENIView {
	v := ENIView{ID: e.ID, Addresses: sortedCopy(append(slices.Clone(e.SecondaryIPs), e.Prefixes...))}
	if e.Attachment != nil {
		v.DeviceIndex = e.Attachment.DeviceIndex
		v.Primary = e.Attachment.DeviceIndex == 0
	}
	return v
}

// BrokerFootprint is what the broker's records hold for each node, by
// instance ID, with each record's status.
func (c *Cluster) BrokerFootprint(ctx context.Context) (map[string]NodeFootprint, map[string]string, error) {
	resp, err := c.admin().ListENIs(ctx, &allotv1.ListENIsRequest{})
	if err != nil {
		return nil, nil, fmt.Errorf("broker ListENIs: %w", err)
	}
	by := map[string][]ENIView{}
	status := map[string]string{}
	for _, ne := range resp.GetEnis() {
		e := ne.GetEni()
		by[ne.GetInstanceId()] = append(by[ne.GetInstanceId()], ENIView{
			ID: e.GetEniId(), DeviceIndex: int(e.GetDeviceIndex()), Primary: e.GetPrimary(),
			Addresses: sortedCopy(append(slices.Clone(e.GetAddresses()), e.GetPrefixes()...)),
		})
		status[e.GetEniId()] = ne.GetStatus()
	}
	out := map[string]NodeFootprint{}
	for id, enis := range by {
		out[id] = footprint(enis)
	}
	return out, status, nil
}

// OurENIs returns every ENI in EC2 carrying this cluster's tag.
func (c *Cluster) OurENIs() []world.NetworkInterface {
	var out []world.NetworkInterface
	for _, e := range c.Sim.World().AllNetworkInterfaces() {
		if e.Tags[ec2client.TagCluster] == c.Prefix {
			out = append(out, *e)
		}
	}
	return out
}

// ENIMACs returns the MACs of the ENIs EC2 has attached to the instance.
func (c *Cluster) ENIMACs(instanceID string) map[string]bool {
	out := map[string]bool{}
	if inst, ok := c.Sim.World().Instance(instanceID); ok {
		for _, e := range inst.NetworkInterfaces {
			out[strings.ToLower(e.MAC)] = true
		}
	}
	return out
}

// EC2Owner returns the instance whose attached ENI holds addr as a
// secondary address or inside a delegated prefix, according to EC2.
func (c *Cluster) EC2Owner(addr netip.Addr) (instanceID, eniID string, ok bool) {
	for _, e := range c.Sim.World().AllNetworkInterfaces() {
		if e.Attachment == nil {
			continue
		}
		for _, s := range e.SecondaryIPs {
			if a, err := netip.ParseAddr(s); err == nil && a == addr {
				return e.Attachment.InstanceID, e.ID, true
			}
		}
		for _, s := range e.Prefixes {
			if p, err := netip.ParsePrefix(s); err == nil && p.Contains(addr) {
				return e.Attachment.InstanceID, e.ID, true
			}
		}
	}
	return "", "", false
}

// HostState is what a node's namespace holds of pod networking.
type HostState struct {
	// Stray are the links that are neither lo nor an ENI attached to the
	// node in EC2 (pod veths while pods run).
	Stray []string
	// PodRules are `to <pod>` and `from <pod>` rules (priorities 512 and
	// 1536).
	PodRules []string
}

// Host reads the node's namespace. enis are the MACs of the ENIs EC2 has
// attached to the node.
func (n *Node) Host(enis map[string]bool) (HostState, error) {
	h, err := netns.GetFromPath(n.NetNS)
	if err != nil {
		return HostState{}, fmt.Errorf("open netns of %s: %w", n.Name, err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h, unix.NETLINK_ROUTE)
	if err != nil {
		return HostState{}, fmt.Errorf("netlink in %s: %w", n.Name, err)
	}
	defer nl.Close()
	var st HostState
	links, err := netnstest.RetryDump(nl.LinkList)
	if err != nil {
		return st, fmt.Errorf("list links of %s: %w", n.Name, err)
	}
	for _, l := range links {
		a := l.Attrs()
		if a.Name != "lo" && !enis[a.HardwareAddr.String()] {
			st.Stray = append(st.Stray, a.Name)
		}
	}
	rules, err := netnstest.RetryDump(func() ([]netlink.Rule, error) { return nl.RuleList(unix.AF_INET) })
	if err != nil {
		return st, fmt.Errorf("list rules of %s: %w", n.Name, err)
	}
	for _, r := range rules {
		if r.Priority == hostnet.PriorityToPod || r.Priority == hostnet.PriorityFromPod {
			st.PodRules = append(st.PodRules, r.String())
		}
	}
	return st, nil
}

// BrokerNodes returns the broker's node summaries by instance ID.
func (c *Cluster) BrokerNodes(ctx context.Context) (map[string]*allotv1.NodeSummary, error) {
	resp, err := c.admin().ListNodes(ctx, &allotv1.ListNodesRequest{})
	if err != nil {
		return nil, fmt.Errorf("broker ListNodes: %w", err)
	}
	out := map[string]*allotv1.NodeSummary{}
	for _, n := range resp.GetNodes() {
		out[n.GetInstanceId()] = n
	}
	return out, nil
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
