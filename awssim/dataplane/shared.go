package dataplane

import (
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"

	"github.com/allotnet/allot/internal/netnstest"
)

// The outside host and the VPC router's leg towards it, in TEST-NET-3
// (RFC 5737), which no real network routes.
var (
	outsideAddr   = netip.MustParseAddr("203.0.113.10")
	outsideRouter = netip.MustParseAddr("203.0.113.1")
	outsideBits   = 24
)

const (
	// outsideLink is the VPC router's link to the outside namespace;
	// outsideHostLink is its peer there.
	outsideLink     = "outside"
	outsideHostLink = "eth0"
	// eniMTU is what EC2 gives ENIs inside a VPC (jumbo frames); the
	// outside link keeps 1500, as the internet does.
	eniMTU = 9001
)

// routerSysctls make the VPC namespace a router that answers for the
// subnets. Defaults are set before any ENI link exists, so every link
// inherits them.
var routerSysctls = []string{
	"net/ipv4/ip_forward", "1",
	// Proxy ARP answers a node's ARP for another address of its subnet
	// (the VPC answers every in-subnet ARP); see proxyDelay.
	"net/ipv4/conf/default/proxy_arp", "1",
	// The source check is nftables' job, with counters; reverse-path
	// filtering would drop silently and differently.
	"net/ipv4/conf/all/rp_filter", "0",
	"net/ipv4/conf/default/rp_filter", "0",
	// A router that tells nodes to bypass it would bypass the source check.
	"net/ipv4/conf/all/send_redirects", "0",
	"net/ipv4/conf/default/send_redirects", "0",
}

// proxyDelay removes a link's random delay before a proxy ARP answer, or
// the first packet between two nodes of a subnet would wait for it. A new
// namespace has no neigh/default to inherit from, so it is set per link.
func proxyDelay(link string) []string {
	return []string{"net/ipv4/neigh/" + link + "/proxy_delay", "0"}
}

// noIPv6 keeps the simulated VPC IPv4-only, as the ENIs are.
var noIPv6 = []string{
	"net/ipv6/conf/all/disable_ipv6", "1",
	"net/ipv6/conf/default/disable_ipv6", "1",
}

func ipv6Sysctls() []string {
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		return nil
	}
	return noIPv6
}

// setupShared creates the VPC and outside namespaces, the link between
// them and the (empty) nftables rules.
func (p *Plane) setupShared() error {
	var err error
	if p.vpc, err = netnstest.Create(p.nsName(suffixVPC)); err != nil {
		return err
	}
	if err := setSysctls(p.vpc, append(routerSysctls, ipv6Sysctls()...)...); err != nil {
		return err
	}
	if p.out, err = netnstest.Create(p.nsName(suffixOutside)); err != nil {
		return err
	}
	if err := setSysctls(p.out, ipv6Sysctls()...); err != nil {
		return err
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: outsideLink},
		PeerName:      outsideHostLink,
		PeerNamespace: netlink.NsFd(int(p.out.Handle())),
	}
	if err := p.vpc.NL.LinkAdd(veth); err != nil {
		return fmt.Errorf("create outside link: %w", err)
	}
	if err := upWithAddr(p.vpc.NL, outsideLink, netip.PrefixFrom(outsideRouter, outsideBits)); err != nil {
		return fmt.Errorf("vpc netns: %w", err)
	}
	host, err := upWithAddrLink(p.out.NL, outsideHostLink, netip.PrefixFrom(outsideAddr, outsideBits))
	if err != nil {
		return fmt.Errorf("outside netns: %w", err)
	}
	// The way back to every VPC address is the router.
	if err := p.out.NL.RouteReplace(&netlink.Route{LinkIndex: host.Attrs().Index, Gw: outsideRouter.AsSlice()}); err != nil {
		return fmt.Errorf("outside netns: default route via %s: %w", outsideRouter, err)
	}
	return p.writeRules()
}

func upWithAddr(nl *netlink.Handle, name string, addr netip.Prefix) error {
	_, err := upWithAddrLink(nl, name, addr)
	return err
}

// upWithAddrLink brings a link up and gives it an address.
func upWithAddrLink(nl *netlink.Handle, name string, addr netip.Prefix) (netlink.Link, error) {
	link, err := nl.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("find link %s: %w", name, err)
	}
	if err := nl.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("bring %s up: %w", name, err)
	}
	if err := nl.AddrReplace(link, &netlink.Addr{IPNet: ipNet(addr)}); err != nil {
		return nil, fmt.Errorf("add %s to %s: %w", addr, name, err)
	}
	return link, nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
