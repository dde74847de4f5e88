package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/internal/netnstest"
)

// eniLink is an attached ENI as the kernel shows it: a veth pair whose node
// end carries the ENI's MAC and whose VPC end (name, index) routes the ENI's
// addresses.
type eniLink struct {
	eniID, instanceID string
	device            int
	name              string // VPC end
	index             int    // VPC end
	mac               net.HardwareAddr
	primary           netip.Addr
	subnet            netip.Prefix
	// sources are every address the ENI owns: the primary and secondaries
	// as /32s, and its prefixes, sorted.
	sources []netip.Prefix
	// check is EC2's source/destination check, on unless switched off.
	check bool
}

// vpcLinkName names an ENI's VPC end after a hash of its ID (an ENI ID is
// longer than the kernel's 15 characters); the alias carries the full ID.
func vpcLinkName(eniID string) string {
	h := fnv.New64a()
	h.Write([]byte(eniID))
	return fmt.Sprintf("e%012x", h.Sum64()&(1<<48-1))
}

// nodeLinkName is the ENI's name in the node, by device index as a Nitro
// instance would number it. The agent finds it by MAC, not by name.
func nodeLinkName(device int) string { return fmt.Sprintf("eth%d", device) }

// gateway is the VPC router's address in a subnet.
func gateway(subnet netip.Prefix) netip.Addr { return subnet.Masked().Addr().Next() }

// desired reads what the kernel should hold for an attached ENI.
func desired(w World, e world.NetworkInterface) (*eniLink, error) {
	sn, ok := w.Subnet(e.SubnetID)
	if !ok {
		return nil, fmt.Errorf("subnet %s is unknown to the world", e.SubnetID)
	}
	subnet, err := netip.ParsePrefix(sn.CIDR)
	if err != nil {
		return nil, fmt.Errorf("subnet %s cidr %q: %w", sn.ID, sn.CIDR, err)
	}
	mac, err := net.ParseMAC(e.MAC)
	if err != nil {
		return nil, fmt.Errorf("mac %q: %w", e.MAC, err)
	}
	primary, err := netip.ParseAddr(e.PrivateIP)
	if err != nil {
		return nil, fmt.Errorf("primary address %q: %w", e.PrivateIP, err)
	}
	l := &eniLink{
		eniID: e.ID, instanceID: e.Attachment.InstanceID, device: e.Attachment.DeviceIndex,
		name: vpcLinkName(e.ID), mac: mac, primary: primary, subnet: subnet.Masked(), check: e.SourceDestCheck,
		sources: []netip.Prefix{netip.PrefixFrom(primary, 32)},
	}
	for _, s := range e.SecondaryIPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("secondary address %q: %w", s, err)
		}
		l.sources = append(l.sources, netip.PrefixFrom(a, 32))
	}
	for _, s := range e.Prefixes {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("prefix %q: %w", s, err)
		}
		l.sources = append(l.sources, p.Masked())
	}
	slices.SortFunc(l.sources, comparePrefix)
	return l, nil
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// removeStale deletes the ENI's link if the ENI is no longer attached where
// the link says. It reports whether the rules must be rewritten.
func (p *Plane) removeStale(e world.NetworkInterface) (rulesChanged bool, err error) {
	cur := p.enis[e.ID]
	if cur == nil {
		return false, nil
	}
	if a := e.Attachment; a != nil && a.InstanceID == cur.instanceID && a.DeviceIndex == cur.device {
		return false, nil
	}
	if err := p.removeLink(cur); err != nil {
		return false, err
	}
	delete(p.enis, e.ID)
	return true, nil
}

// syncAttached converges an attached ENI's link, routes and sources on the
// world's state, creating the link if needed. It reports whether the rules
// must be rewritten.
func (p *Plane) syncAttached(w World, e world.NetworkInterface) (rulesChanged bool, err error) {
	if e.Attachment == nil {
		return false, nil
	}
	want, err := desired(w, e)
	if err != nil {
		return false, err
	}
	cur := p.enis[e.ID]
	if cur == nil {
		if err := p.createLink(want); err != nil {
			return false, err
		}
		p.enis[e.ID], cur, rulesChanged = want, want, true
	}
	if err := p.syncRoutes(cur, want.sources); err != nil {
		return rulesChanged, err
	}
	if !slices.Equal(cur.sources, want.sources) || cur.check != want.check {
		cur.sources, cur.check, rulesChanged = want.sources, want.check, true
	}
	return rulesChanged, nil
}

// createLink makes the ENI's veth pair: the node end with the ENI's MAC in
// the node's namespace, the VPC end up with the subnet gateway address and a
// permanent neighbour entry for the ENI's primary address (the VPC knows
// each ENI's MAC; it never has to ARP for it). The primary ENI's node end
// is configured as DHCP would; others are left down and bare.
func (p *Plane) createLink(l *eniLink) (err error) {
	node, err := p.ensureNode(l.instanceID)
	if err != nil {
		return err
	}
	if err := p.clearLeftovers(node, l); err != nil {
		return err
	}
	veth := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: l.name, MTU: eniMTU},
		PeerName:         nodeLinkName(l.device),
		PeerHardwareAddr: l.mac,
		PeerMTU:          eniMTU,
		PeerNamespace:    netlink.NsFd(int(node.Handle())),
	}
	if err := p.vpc.NL.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth %s/%s: %w", l.name, veth.PeerName, err)
	}
	defer func() {
		if err != nil {
			// Deleting one end deletes the pair.
			err = errors.Join(err, ignoreNotFound(p.vpc.NL.LinkDel(veth)))
		}
	}()
	link, err := p.vpc.NL.LinkByName(l.name)
	if err != nil {
		return fmt.Errorf("find %s: %w", l.name, err)
	}
	l.index = link.Attrs().Index
	if err := p.vpc.NL.LinkSetAlias(link, l.eniID); err != nil {
		return fmt.Errorf("alias %s: %w", l.name, err)
	}
	if err := setSysctls(p.vpc, proxyDelay(l.name)...); err != nil {
		return err
	}
	if err := upWithAddr(p.vpc.NL, l.name, netip.PrefixFrom(gateway(l.subnet), 32)); err != nil {
		return err
	}
	neigh := &netlink.Neigh{
		LinkIndex: l.index, Family: unix.AF_INET, State: netlink.NUD_PERMANENT,
		IP: l.primary.AsSlice(), HardwareAddr: l.mac,
	}
	if err := p.vpc.NL.NeighSet(neigh); err != nil {
		return fmt.Errorf("neighbour %s on %s: %w", l.primary, l.name, err)
	}
	if l.device == 0 {
		if err := configurePrimary(node, l); err != nil {
			return err
		}
	}
	p.log.Info("eni link created", "eni", l.eniID, "instance", l.instanceID, "device_index", l.device,
		"mac", l.mac.String(), "link", l.name)
	return nil
}

// configurePrimary gives the node end of the primary ENI what the VPC's
// DHCP would: the primary address with the subnet's length, and a default
// route via the subnet gateway.
func configurePrimary(node *netnstest.NS, l *eniLink) error {
	name := nodeLinkName(l.device)
	link, err := upWithAddrLink(node.NL, name, netip.PrefixFrom(l.primary, l.subnet.Bits()))
	if err != nil {
		return fmt.Errorf("node %s: %w", l.instanceID, err)
	}
	def := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: gateway(l.subnet).AsSlice()}
	if err := node.NL.RouteReplace(def); err != nil {
		return fmt.Errorf("node %s: default route via %s: %w", l.instanceID, gateway(l.subnet), err)
	}
	return nil
}

// clearLeftovers removes what an earlier, failed pass may have left: the
// VPC end by name, and in the node a link with the ENI's MAC or its name
// (never one of the agent's pod veths, which have neither).
func (p *Plane) clearLeftovers(node *netnstest.NS, l *eniLink) error {
	if old, err := p.vpc.NL.LinkByName(l.name); err == nil {
		if other := old.Attrs().Alias; other != l.eniID && p.enis[other] != nil {
			return fmt.Errorf("link name %s of %s is taken by %s (hash collision)", l.name, l.eniID, other)
		}
		if err := ignoreNotFound(p.vpc.NL.LinkDel(old)); err != nil {
			return fmt.Errorf("remove leftover %s: %w", l.name, err)
		}
	}
	links, err := netnstest.RetryDump(node.NL.LinkList)
	if err != nil {
		return fmt.Errorf("list links of node %s: %w", l.instanceID, err)
	}
	for _, old := range links {
		a := old.Attrs()
		if a.Name != nodeLinkName(l.device) && !bytes.Equal(a.HardwareAddr, l.mac) {
			continue
		}
		if err := ignoreNotFound(node.NL.LinkDel(old)); err != nil {
			return fmt.Errorf("remove leftover %s of node %s: %w", a.Name, l.instanceID, err)
		}
	}
	return nil
}

// removeLink deletes the ENI's veth pair, and with it its routes and
// neighbour entry.
func (p *Plane) removeLink(l *eniLink) error {
	link, err := p.vpc.NL.LinkByName(l.name)
	if err == nil {
		err = p.vpc.NL.LinkDel(link)
	}
	if err := ignoreNotFound(err); err != nil {
		return fmt.Errorf("remove %s: %w", l.name, err)
	}
	p.log.Info("eni link removed", "eni", l.eniID, "instance", l.instanceID, "device_index", l.device, "link", l.name)
	return nil
}

// syncRoutes makes the main-table routes through the ENI's VPC end exactly
// one per owned address or prefix: the primary directly (its neighbour
// entry is permanent), everything else via the primary, so that delivery
// goes to the ENI's MAC without ARP, as in a VPC.
func (p *Plane) syncRoutes(l *eniLink, sources []netip.Prefix) error {
	have, err := netnstest.RetryDump(func() ([]netlink.Route, error) {
		return p.vpc.NL.RouteListFiltered(unix.AF_INET, &netlink.Route{LinkIndex: l.index}, netlink.RT_FILTER_OIF)
	})
	if err != nil {
		return fmt.Errorf("list routes of %s: %w", l.name, err)
	}
	want := map[netip.Prefix]*netlink.Route{}
	for _, s := range sources {
		r := &netlink.Route{LinkIndex: l.index, Dst: ipNet(s), Scope: netlink.SCOPE_LINK}
		if s != netip.PrefixFrom(l.primary, 32) {
			r.Gw, r.Scope, r.Flags = l.primary.AsSlice(), netlink.SCOPE_UNIVERSE, int(netlink.FLAG_ONLINK)
		}
		want[s] = r
	}
	for _, r := range have {
		dst := dstPrefix(r.Dst)
		if w, ok := want[dst]; ok && r.Gw.Equal(w.Gw) {
			delete(want, dst)
			continue
		}
		if err := ignoreNotFound(p.vpc.NL.RouteDel(&r)); err != nil {
			return fmt.Errorf("remove route %s from %s: %w", dst, l.name, err)
		}
	}
	for _, s := range slices.SortedFunc(maps.Keys(want), comparePrefix) {
		if err := p.vpc.NL.RouteReplace(want[s]); err != nil {
			return fmt.Errorf("route %s to %s (%s): %w", s, l.name, l.eniID, err)
		}
	}
	return nil
}

func dstPrefix(n *net.IPNet) netip.Prefix {
	if n == nil {
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	a, _ := netip.AddrFromSlice(n.IP)
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones)
}

func ignoreNotFound(err error) error {
	if err == nil || isNotFound(err) {
		return nil
	}
	return err
}
