package hostnet

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrLinkNotFound means no link in the node namespace carries an ENI's MAC.
var ErrLinkNotFound = errors.New("no link with the ENI's MAC")

// SetupENI finds the ENI's link by MAC, brings it up with loose reverse-path
// filtering, adds its primary address if missing and, for a secondary ENI,
// makes its route table hold exactly the subnet route and a default route
// via the subnet gateway.
func (l *Linux) SetupENI(c ENIConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	mac, _ := parseMAC(c.MAC)
	link, err := l.waitLinkByMAC(mac)
	if err != nil {
		return fmt.Errorf("setup ENI %s (device %d): %w", c.MAC, c.DeviceIndex, err)
	}
	name := link.Attrs().Name
	if c.MTU != 0 && link.Attrs().MTU != c.MTU {
		if err := l.nl.LinkSetMTU(link, c.MTU); err != nil {
			return fmt.Errorf("setup ENI %s: set mtu %d on %s: %w", c.MAC, c.MTU, name, err)
		}
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := l.nl.LinkSetUp(link); err != nil {
			return fmt.Errorf("setup ENI %s: bring %s up: %w", c.MAC, name, err)
		}
	}
	if err := l.setSysctls(ipForward, rpFilterLoose(name)); err != nil {
		return fmt.Errorf("setup ENI %s: %w", c.MAC, err)
	}
	if c.PrimaryIP.IsValid() {
		if err := l.ensureENIAddress(link, c); err != nil {
			return fmt.Errorf("setup ENI %s: %w", c.MAC, err)
		}
	}
	if c.DeviceIndex == 0 {
		return nil
	}
	if err := l.syncENITable(link, c); err != nil {
		return fmt.Errorf("setup ENI %s: %w", c.MAC, err)
	}
	l.log.Debug("eni ready", "mac", c.MAC, "link", name, "device_index", c.DeviceIndex,
		"table", RouteTable(c.DeviceIndex))
	return nil
}

// waitLinkByMAC polls for the link: an ENI's device shows up a little after
// EC2 reports the attachment.
func (l *Linux) waitLinkByMAC(mac net.HardwareAddr) (netlink.Link, error) {
	deadline := time.Now().Add(l.linkWait)
	for {
		links, err := retryDump(l.nl.LinkList)
		if err != nil {
			return nil, fmt.Errorf("list links: %w", err)
		}
		for _, link := range links {
			if isENILink(link, mac) {
				return link, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w %s after %v", ErrLinkNotFound, mac, l.linkWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// isENILink matches by MAC, but never one of our own pod veths (whose MACs
// are random and could, in principle, repeat an ENI's).
func isENILink(link netlink.Link, mac net.HardwareAddr) bool {
	return bytes.Equal(link.Attrs().HardwareAddr, mac) && !isOurVeth(link)
}

// ensureENIAddress adds the ENI's primary address if it is missing. On a
// secondary ENI it carries no prefix route: the subnet route lives in the
// ENI's own table, so the main table keeps sending host traffic through the
// primary interface.
func (l *Linux) ensureENIAddress(link netlink.Link, c ENIConfig) error {
	want := &net.IPNet{IP: c.PrimaryIP.AsSlice(), Mask: net.CIDRMask(c.Subnet.Bits(), 32)}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return l.nl.AddrList(link, unix.AF_INET) })
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", link.Attrs().Name, err)
	}
	for _, a := range addrs {
		if a.IPNet.IP.Equal(want.IP) && bytes.Equal(a.IPNet.Mask, want.Mask) {
			if c.DeviceIndex == 0 || a.Flags&unix.IFA_F_NOPREFIXROUTE != 0 {
				return nil
			}
		}
	}
	addr := &netlink.Addr{IPNet: want}
	if c.DeviceIndex > 0 {
		addr.Flags = unix.IFA_F_NOPREFIXROUTE
	}
	if err := l.nl.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("add address %s to %s: %w", want, link.Attrs().Name, err)
	}
	if c.DeviceIndex > 0 {
		// An address added earlier without the flag left a prefix route in
		// main; only this link's is removed, as ENIs often share a subnet.
		stale := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: prefixToIPNet(c.Subnet.Masked()),
			Table: mainTable, Scope: netlink.SCOPE_NOWHERE}
		if err := l.nl.RouteDel(stale); err != nil && !isNotFound(err) {
			return fmt.Errorf("remove main-table subnet route of %s: %w", link.Attrs().Name, err)
		}
	}
	return nil
}

// syncENITable makes the ENI's table hold exactly its two routes. A table
// is owned whole by the device index, so a leftover from an ENI previously
// attached at the same index is removed.
func (l *Linux) syncENITable(link netlink.Link, c ENIConfig) error {
	table := RouteTable(c.DeviceIndex)
	idx := link.Attrs().Index
	want := []netlink.Route{
		{LinkIndex: idx, Dst: prefixToIPNet(c.Subnet.Masked()), Src: c.PrimaryIP.AsSlice(),
			Scope: netlink.SCOPE_LINK, Table: table},
		{LinkIndex: idx, Dst: prefixToIPNet(netip.PrefixFrom(netip.IPv4Unspecified(), 0)),
			Gw: SubnetGateway(c.Subnet).AsSlice(), Scope: netlink.SCOPE_UNIVERSE, Table: table},
	}
	for i := range want {
		if err := l.nl.RouteReplace(&want[i]); err != nil {
			return fmt.Errorf("set route %s in table %d: %w", want[i].Dst, table, err)
		}
	}
	have, err := l.tableRoutes(table)
	if err != nil {
		return err
	}
	for _, r := range have {
		if r.LinkIndex == idx && (ipNetEqual(r.Dst, want[0].Dst) || ipNetEqual(r.Dst, want[1].Dst)) {
			continue
		}
		if err := l.nl.RouteDel(&r); err != nil && !isNotFound(err) {
			return fmt.Errorf("remove stale route %s from table %d: %w", r.Dst, table, err)
		}
	}
	return nil
}

func (l *Linux) tableRoutes(table int) ([]netlink.Route, error) {
	routes, err := retryDump(func() ([]netlink.Route, error) {
		return l.nl.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, fmt.Errorf("list routes of table %d: %w", table, err)
	}
	return routes, nil
}

func prefixToIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func host32(a netip.Addr) *net.IPNet {
	return prefixToIPNet(netip.PrefixFrom(a, 32))
}

// ipNetEqual compares two destinations, treating nil as the default route
// (the kernel reports 0.0.0.0/0 as a nil Dst).
func ipNetEqual(a, b *net.IPNet) bool {
	return ipNetString(a) == ipNetString(b)
}

func ipNetString(n *net.IPNet) string {
	if n == nil {
		return "0.0.0.0/0"
	}
	return n.String()
}

// ipNetToPrefix converts a kernel destination; nil is the default route.
func ipNetToPrefix(n *net.IPNet) netip.Prefix {
	if n == nil {
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones)
}
