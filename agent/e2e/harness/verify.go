package harness

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
)

// Wired is what a pod's attachment must look like once ADD succeeded.
type Wired struct {
	Network string
	Pod     *Pod
	Addr    netip.Addr
	// DeviceIndex of the ENI that owns Addr (from EC2): pods on secondary
	// ENIs need a source rule into that ENI's table.
	DeviceIndex int
}

// VerifyWired lists every piece of the pod's network that is missing or
// wrong, on both sides: the pod's interface, its only address (the /32), its
// routes (gateway link route, default via 169.254.1.1), the permanent
// neighbour entry resolving the gateway to the host veth's MAC; the host
// veth (named from the attachment, paired with the pod interface), its /32
// route and the to/from rules. host is the node's state read once for many
// pods.
func VerifyWired(host HostSide, w Wired) []string {
	var bad []string
	miss := func(f string, a ...any) { bad = append(bad, fmt.Sprintf(f, a...)) }
	ps, err := InspectPod(w.Pod)
	if err != nil {
		return []string{err.Error()}
	}
	name := HostVethName(w.Network, w.Pod)
	hv := host.Veths[name]
	switch {
	case !ps.Exists:
		miss("pod has no %s", w.Pod.RT.IfName)
	default:
		if !ps.Up || ps.Type != "veth" {
			miss("pod %s is %s up=%v, want an up veth", w.Pod.RT.IfName, ps.Type, ps.Up)
		}
		if want := []netip.Prefix{netip.PrefixFrom(w.Addr, 32)}; !slices.Equal(ps.Addrs, want) {
			miss("pod addresses %v, want %v", ps.Addrs, want)
		}
		wantRoutes := []string{"169.254.1.1/32 scope link", "default via 169.254.1.1 scope universe"}
		if !slices.Equal(ps.Routes, wantRoutes) {
			miss("pod routes %q, want %q", ps.Routes, wantRoutes)
		}
		if ps.GatewayState != netlink.NUD_PERMANENT {
			miss("pod neighbour %s state %#x, want permanent", PodGateway, ps.GatewayState)
		}
		if hv != nil && ps.GatewayMAC != hv.MAC {
			miss("pod neighbour %s -> %q, want the host veth's %s", PodGateway, ps.GatewayMAC, hv.MAC)
		}
	}
	if hv == nil {
		miss("host veth %s missing", name)
		return bad
	}
	if !hv.Up {
		miss("host veth %s down", name)
	}
	if ps.Exists && hv.PeerIndex != ps.Index {
		miss("host veth %s peers with index %d, pod %s is %d", name, hv.PeerIndex, w.Pod.RT.IfName, ps.Index)
	}
	if want := []netip.Addr{w.Addr}; !slices.Equal(hv.Routes, want) {
		miss("host routes via %s: %v, want %v", name, hv.Routes, want)
	}
	if tbl, ok := host.ToPod[w.Addr]; !ok || tbl != mainTable {
		miss("rule %d to %s lookup main: table %d present=%v", PriorityToPod, w.Addr, tbl, ok)
	}
	tbl, ok := host.FromPod[w.Addr]
	switch {
	case w.DeviceIndex == 0 && ok:
		miss("pod on the primary ENI has a source rule into table %d", tbl)
	case w.DeviceIndex > 0 && (!ok || tbl != w.DeviceIndex+1):
		miss("rule %d from %s lookup %d: table %d present=%v", PriorityFromPod, w.Addr, w.DeviceIndex+1, tbl, ok)
	}
	return bad
}

// VerifyGone lists what is left of an attachment after DEL: the host veth,
// its routes, the rules of addr.
func VerifyGone(host HostSide, network string, p *Pod, addr netip.Addr) []string {
	var bad []string
	if _, ok := host.Veths[HostVethName(network, p)]; ok {
		bad = append(bad, "host veth "+HostVethName(network, p)+" still there")
	}
	for name, v := range host.Veths {
		if slices.Contains(v.Routes, addr) {
			bad = append(bad, fmt.Sprintf("route %s via %s still there", addr, name))
		}
	}
	if _, ok := host.ToPod[addr]; ok {
		bad = append(bad, fmt.Sprintf("rule to %s still there", addr))
	}
	if _, ok := host.FromPod[addr]; ok {
		bad = append(bad, fmt.Sprintf("rule from %s still there", addr))
	}
	return bad
}
