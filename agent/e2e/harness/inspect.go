package harness

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/allotnet/allot/agent/hostnet"
	"github.com/allotnet/allot/internal/netnstest"
)

// Rule priorities the agent uses (agent/hostnet), re-stated so a change on
// either side shows up here.
const (
	PriorityToPod   = 512
	PriorityFromPod = 1536
	mainTable       = 254
)

// PodGateway is the pod's default gateway.
var PodGateway = netip.MustParseAddr("169.254.1.1")

// HostVethName is the host veth the agent must create for the pod's
// attachment in network.
func HostVethName(network string, p *Pod) string {
	return hostnet.HostVethName(hostnet.Attachment{Network: network, ContainerID: p.RT.ContainerID, IfName: p.RT.IfName})
}

// PodSide is what the kernel shows inside a pod namespace.
type PodSide struct {
	// Exists is false when the pod has no interface of the attachment's
	// name.
	Exists bool
	Up     bool
	Type   string
	Index  int
	MAC    string
	Addrs  []netip.Prefix
	// Routes render as "dst via gw scope s".
	Routes []string
	// GatewayNeigh is the neighbour entry for the pod gateway, if any.
	GatewayMAC   string
	GatewayState int
}

// InspectPod reads the pod's interface, addresses, routes and the gateway's
// neighbour entry.
func InspectPod(p *Pod) (PodSide, error) {
	var s PodSide
	link, err := p.NS.NL.LinkByName(p.RT.IfName)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return s, nil
		}
		return s, fmt.Errorf("pod %s: %w", p, err)
	}
	s.Exists = true
	s.Up = link.Attrs().Flags&net.FlagUp != 0
	s.Type = link.Type()
	s.Index = link.Attrs().Index
	s.MAC = link.Attrs().HardwareAddr.String()
	addrs, err := p.NS.NL.AddrList(link, unix.AF_INET)
	if err != nil {
		return s, fmt.Errorf("pod %s addresses: %w", p, err)
	}
	for _, a := range addrs {
		s.Addrs = append(s.Addrs, toPrefix(a.IPNet))
	}
	routes, err := p.NS.NL.RouteList(link, unix.AF_INET)
	if err != nil {
		return s, fmt.Errorf("pod %s routes: %w", p, err)
	}
	for _, r := range routes {
		s.Routes = append(s.Routes, renderRoute(r))
	}
	slices.Sort(s.Routes)
	neighs, err := p.NS.NL.NeighList(link.Attrs().Index, unix.AF_INET)
	if err != nil {
		return s, fmt.Errorf("pod %s neighbours: %w", p, err)
	}
	for _, n := range neighs {
		if n.IP.Equal(PodGateway.AsSlice()) {
			s.GatewayMAC, s.GatewayState = n.HardwareAddr.String(), n.State
		}
	}
	return s, nil
}

// HostVeth is one of the agent's veths in the node namespace.
type HostVeth struct {
	Name  string
	Index int
	MAC   string
	Up    bool
	Alias string
	// PeerIndex is the pod-side interface's index (in its namespace).
	PeerIndex int
	// Routes are the main-table /32 routes through it.
	Routes []netip.Addr
}

// HostSide is the agent's per-pod state in the node namespace.
type HostSide struct {
	// Veths are the links with the agent's prefix, by name.
	Veths map[string]*HostVeth
	// ToPod are the destinations of the rules at PriorityToPod (table main).
	ToPod map[netip.Addr]int
	// FromPod maps each source of a rule at PriorityFromPod to its table.
	FromPod map[netip.Addr]int
}

// InspectHost reads the node namespace's pod veths, their routes and the
// per-pod rules.
func InspectHost(node *NetNS) (HostSide, error) {
	h := HostSide{Veths: map[string]*HostVeth{}, ToPod: map[netip.Addr]int{}, FromPod: map[netip.Addr]int{}}
	links, err := netnstest.RetryDump(node.NL.LinkList)
	if err != nil {
		return h, fmt.Errorf("node links: %w", err)
	}
	byIndex := map[int]*HostVeth{}
	for _, l := range links {
		if l.Type() != "veth" || !strings.HasPrefix(l.Attrs().Name, hostnet.VethPrefix) {
			continue
		}
		v := &HostVeth{Name: l.Attrs().Name, Index: l.Attrs().Index, MAC: l.Attrs().HardwareAddr.String(),
			Up: l.Attrs().Flags&net.FlagUp != 0, Alias: l.Attrs().Alias, PeerIndex: l.Attrs().ParentIndex}
		h.Veths[v.Name] = v
		byIndex[v.Index] = v
	}
	routes, err := netnstest.RetryDump(func() ([]netlink.Route, error) {
		return node.NL.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: mainTable}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return h, fmt.Errorf("node routes: %w", err)
	}
	for _, r := range routes {
		v, ok := byIndex[r.LinkIndex]
		if !ok || r.Dst == nil {
			continue
		}
		if ones, _ := r.Dst.Mask.Size(); ones == 32 {
			v.Routes = append(v.Routes, toPrefix(r.Dst).Addr())
		}
	}
	rules, err := netnstest.RetryDump(func() ([]netlink.Rule, error) { return node.NL.RuleList(unix.AF_INET) })
	if err != nil {
		return h, fmt.Errorf("node rules: %w", err)
	}
	for _, r := range rules {
		switch {
		case r.Priority == PriorityToPod && r.Dst != nil:
			h.ToPod[toPrefix(r.Dst).Addr()] = r.Table
		case r.Priority == PriorityFromPod && r.Src != nil:
			h.FromPod[toPrefix(r.Src).Addr()] = r.Table
		}
	}
	return h, nil
}

// Wiring is the host's view condensed to what an agent record says: which
// address each host veth routes. Two views that agree on it agree on what
// is wired where.
func (h HostSide) Wiring() map[string][]netip.Addr {
	out := map[string][]netip.Addr{}
	for name, v := range h.Veths {
		out[name] = slices.Clone(v.Routes)
		slices.SortFunc(out[name], netip.Addr.Compare)
	}
	return out
}

func toPrefix(n *net.IPNet) netip.Prefix {
	a, _ := netip.AddrFromSlice(n.IP)
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones)
}

func renderRoute(r netlink.Route) string {
	dst := "default"
	if r.Dst != nil && !(r.Dst.IP.IsUnspecified() && isZeroMask(r.Dst.Mask)) {
		dst = toPrefix(r.Dst).String()
	}
	s := dst
	if r.Gw != nil {
		s += " via " + r.Gw.String()
	}
	return s + " scope " + r.Scope.String()
}

func isZeroMask(m net.IPMask) bool {
	ones, _ := m.Size()
	return ones == 0
}

// HostNeighbour returns the node's neighbour entry for addr on the host veth
// (the MAC and NUD state), or "" if there is none. The agent installs no
// permanent entry on this side; after traffic, ARP must have resolved the
// pod's address to the pod interface's MAC.
func HostNeighbour(node *NetNS, veth string, addr netip.Addr) (string, int, error) {
	l, err := node.NL.LinkByName(veth)
	if err != nil {
		return "", 0, err
	}
	ns, err := node.NL.NeighList(l.Attrs().Index, unix.AF_INET)
	if err != nil {
		return "", 0, err
	}
	for _, n := range ns {
		if n.IP.Equal(addr.AsSlice()) {
			return n.HardwareAddr.String(), n.State, nil
		}
	}
	return "", 0, nil
}
