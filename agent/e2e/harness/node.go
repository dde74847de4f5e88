package harness

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/internal/netnstest"
)

// Node is one simulated EC2 instance's network: a "node" namespace where
// the agent works, and a "vpc" namespace standing in for the VPC router.
// Every ENI awssim attaches to the instance appears in the node namespace as
// a veth carrying the ENI's MAC (named ens<5+device index>, as on Nitro),
// whose peer sits in the vpc namespace. The vpc namespace answers for each
// subnet gateway, routes every address of an ENI (primary, secondary,
// prefix) back through that ENI's link, and filters reverse paths strictly,
// so a packet leaving through the wrong ENI is dropped as the VPC's
// source/destination check would drop it.
//
// Node is a world.Hooks; register it with awssim before the instance
// launches (Cloud does) so it sees the primary ENI attach.
type Node struct {
	InstanceID string
	NS, VPC    *NetNS
	// subnets gives each subnet's CIDR (the ENI snapshot only names it).
	subnets map[string]netip.Prefix

	mu sync.Mutex
	// links maps an attached ENI's ID to its device index.
	links map[string]int
	// routed is the set of addresses the vpc routes to each device index.
	routed map[int][]netip.Prefix
	// gateways already on the vpc's lo.
	gateways map[netip.Addr]bool
	// primaryIP is the instance's primary address, once attached.
	primaryIP netip.Addr
	errs      []error
}

var _ world.Hooks = (*Node)(nil)

// NewNode creates the node and vpc namespaces for instanceID, whose ENIs
// live in the given subnets (ID to CIDR).
func NewNode(t testing.TB, instanceID string, subnets map[string]netip.Prefix) *Node {
	t.Helper()
	RequireRoot(t)
	n := &Node{
		InstanceID: instanceID,
		subnets:    subnets,
		VPC:        NewNetNS(t, "vpc"),
		NS:         NewNetNS(t, "node"),
		links:      map[string]int{},
		routed:     map[int][]netip.Prefix{},
		gateways:   map[netip.Addr]bool{},
	}
	for _, k := range []string{"all", "default"} {
		if err := n.VPC.Sysctl("net/ipv4/conf/"+k+"/rp_filter", "1"); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// Err returns every error the hooks met (they cannot return one); a test
// should fail on it.
func (n *Node) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return errors.Join(n.errs...)
}

// PrimaryIP is the instance's primary address.
func (n *Node) PrimaryIP() netip.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.primaryIP
}

// LinkName is the node-side name of the ENI link at a device index.
func LinkName(deviceIndex int) string { return fmt.Sprintf("ens%d", 5+deviceIndex) }

func vpcLinkName(deviceIndex int) string { return fmt.Sprintf("vpc%d", deviceIndex) }

// OnAttach creates the ENI's link. For the primary ENI it also does what the
// instance's OS does at boot: the primary address and a default route via
// the subnet gateway.
func (n *Node) OnAttach(instanceID string, e world.NetworkInterface) {
	if instanceID != n.InstanceID || e.Attachment == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.attach(e); err != nil {
		n.errs = append(n.errs, fmt.Errorf("attach %s at device %d: %w", e.ID, e.Attachment.DeviceIndex, err))
	}
}

func (n *Node) attach(e world.NetworkInterface) error {
	dev := e.Attachment.DeviceIndex
	mac, err := net.ParseMAC(e.MAC)
	if err != nil {
		return err
	}
	v := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: LinkName(dev), HardwareAddr: mac},
		PeerName:      vpcLinkName(dev),
		PeerNamespace: netlink.NsFd(int(n.VPC.Handle())),
	}
	if err := n.NS.NL.LinkAdd(v); err != nil {
		return fmt.Errorf("create %s: %w", LinkName(dev), err)
	}
	peer, err := n.VPC.NL.LinkByName(vpcLinkName(dev))
	if err != nil {
		return err
	}
	if err := n.VPC.NL.LinkSetUp(peer); err != nil {
		return err
	}
	if err := n.VPC.Sysctl("net/ipv4/conf/"+vpcLinkName(dev)+"/rp_filter", "1"); err != nil {
		return err
	}
	subnet, ok := n.subnets[e.SubnetID]
	if !ok {
		return fmt.Errorf("eni %s is in subnet %s, which the node was not told about", e.ID, e.SubnetID)
	}
	gw := subnet.Masked().Addr().Next()
	if !n.gateways[gw] {
		lo, err := n.VPC.NL.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := n.VPC.NL.AddrAdd(lo, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(gw, 32))}); err != nil {
			return fmt.Errorf("gateway %s: %w", gw, err)
		}
		n.gateways[gw] = true
	}
	n.links[e.ID] = dev
	if err := n.syncRoutes(dev, e); err != nil {
		return err
	}
	if dev != 0 {
		return nil
	}
	primary, err := netip.ParseAddr(e.PrivateIP)
	if err != nil {
		return err
	}
	n.primaryIP = primary
	link, err := n.NS.NL.LinkByName(LinkName(0))
	if err != nil {
		return err
	}
	if err := n.NS.NL.AddrAdd(link, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(primary, subnet.Bits()))}); err != nil {
		return fmt.Errorf("primary address %s: %w", primary, err)
	}
	if err := n.NS.NL.LinkSetUp(link); err != nil {
		return err
	}
	def := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw.AsSlice(), Dst: ipNet(netip.MustParsePrefix("0.0.0.0/0"))}
	if err := n.NS.NL.RouteAdd(def); err != nil {
		return fmt.Errorf("default route via %s: %w", gw, err)
	}
	return nil
}

// OnDetach removes the ENI's link (its peer goes with it).
func (n *Node) OnDetach(instanceID string, e world.NetworkInterface) {
	if instanceID != n.InstanceID {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	dev, ok := n.links[e.ID]
	if !ok {
		return
	}
	delete(n.links, e.ID)
	delete(n.routed, dev)
	link, err := n.NS.NL.LinkByName(LinkName(dev))
	if err == nil {
		err = n.NS.NL.LinkDel(link)
	}
	if err != nil {
		n.errs = append(n.errs, fmt.Errorf("detach %s from device %d: %w", e.ID, dev, err))
	}
}

// OnAddressesChanged routes the ENI's current addresses to its link.
func (n *Node) OnAddressesChanged(e world.NetworkInterface) {
	n.mu.Lock()
	defer n.mu.Unlock()
	dev, ok := n.links[e.ID]
	if !ok {
		return // not attached here (yet): OnAttach routes what it has then
	}
	if err := n.syncRoutes(dev, e); err != nil {
		n.errs = append(n.errs, fmt.Errorf("addresses of %s: %w", e.ID, err))
	}
}

// syncRoutes makes the vpc route exactly e's addresses through device
// dev: the ENI's primary address on the link, and its secondary addresses
// and prefixes via the primary, which the node answers ARP for on that
// link. (The VPC fabric knows which ENI owns an address without asking; a
// route via the ENI's own address gets the frame to the ENI's MAC the same
// way, since a pod address is on no interface the node would answer ARP
// for.)
func (n *Node) syncRoutes(dev int, e world.NetworkInterface) error {
	peer, err := n.VPC.NL.LinkByName(vpcLinkName(dev))
	if err != nil {
		return err
	}
	primary, err := netip.ParseAddr(e.PrivateIP)
	if err != nil {
		return err
	}
	want := []netip.Prefix{netip.PrefixFrom(primary, 32)}
	for _, s := range e.SecondaryIPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return err
		}
		want = append(want, netip.PrefixFrom(a, 32))
	}
	for _, s := range e.Prefixes {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return err
		}
		want = append(want, p)
	}
	idx := peer.Attrs().Index
	for _, p := range n.routed[dev] {
		if !slices.Contains(want, p) {
			if err := n.VPC.NL.RouteDel(&netlink.Route{LinkIndex: idx, Dst: ipNet(p)}); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("unroute %s: %w", p, err)
			}
		}
	}
	for i, p := range want {
		r := &netlink.Route{LinkIndex: idx, Dst: ipNet(p), Scope: netlink.SCOPE_LINK}
		if i > 0 {
			r = &netlink.Route{LinkIndex: idx, Dst: ipNet(p), Gw: primary.AsSlice()}
		}
		if err := n.VPC.NL.RouteReplace(r); err != nil {
			return fmt.Errorf("route %s: %w", p, err)
		}
	}
	n.routed[dev] = want
	return nil
}

// ENILinks returns the node's ENI links by device index, as found in the
// node namespace.
func (n *Node) ENILinks() (map[int]netlink.Link, error) {
	links, err := netnstest.RetryDump(n.NS.NL.LinkList)
	if err != nil {
		return nil, err
	}
	out := map[int]netlink.Link{}
	for _, l := range links {
		var dev int
		if _, err := fmt.Sscanf(l.Attrs().Name, "ens%d", &dev); err == nil && dev >= 5 {
			out[dev-5] = l
		}
	}
	return out, nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
