package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

var (
	// ErrAddressInUse means the pod address is already routed to another
	// interface on the node: wiring it again would cut that pod off.
	ErrAddressInUse = errors.New("address already routed to another interface")
	// ErrIfNameTaken means the pod namespace already has an interface of
	// that name that is not this attachment's veth.
	ErrIfNameTaken = errors.New("interface name already taken in the pod netns")
)

// SetupPod wires one attachment. Run again, it reuses the veth pair if both
// ends are still paired and only restores what is missing; a host veth of
// ours that lost its peer is replaced.
func (l *Linux) SetupPod(c PodConfig) (PodResult, error) {
	return l.setupPod(c, true)
}

// setupPod wires the pod. With prune set it also drops host routes and
// rules left by an earlier configuration of the same attachment; Reconcile
// passes false, as it only reports such leftovers.
func (l *Linux) setupPod(c PodConfig, prune bool) (PodResult, error) {
	if err := c.Validate(); err != nil {
		return PodResult{}, err
	}
	hostName := HostVethName(c.Attachment)
	defer l.beginSetup(hostName)()
	fail := func(step string, err error) (PodResult, error) {
		return PodResult{}, fmt.Errorf("setup pod %v: %s: %w", c.Attachment, step, err)
	}

	owner, err := l.routeOwner(c.Address)
	if err != nil {
		return fail("check address", err)
	}
	if owner != "" && owner != hostName {
		return fail("check address", fmt.Errorf("%w: %v via %s", ErrAddressInUse, c.Address, owner))
	}
	if err := l.ensureForwarding(); err != nil {
		return fail("enable forwarding", err)
	}

	podNS, err := openNetNS(c.NetNS)
	if err != nil {
		return fail("pod netns", err)
	}
	defer podNS.Close()
	podNL, err := netlink.NewHandleAt(podNS, unix.NETLINK_ROUTE)
	if err != nil {
		return fail("open netlink in pod netns", err)
	}
	defer podNL.Close()

	host, pod, fresh, err := l.ensureVethPair(c, hostName, podNS, podNL)
	if err != nil {
		return fail("veth pair", err)
	}
	if err := l.configureHostVeth(c, host); err != nil {
		return fail("host veth "+hostName, err)
	}
	if err := configurePodSide(podNL, pod, c, host.Attrs().HardwareAddr, fresh); err != nil {
		return fail("pod interface "+c.Attachment.IfName, err)
	}
	if err := l.ensureHostRouting(c, host, prune, fresh); err != nil {
		return fail("host routing", err)
	}
	if err := l.ensureHostNeighbour(c, host, pod.Attrs().HardwareAddr); err != nil {
		return fail("host neighbour", err)
	}
	l.log.Debug("pod wired", "attachment", c.Attachment.String(), "host_veth", hostName,
		"address", c.Address.String(), "device_index", c.DeviceIndex)
	return PodResult{
		HostVeth:    hostName,
		HostVethMAC: host.Attrs().HardwareAddr.String(),
		PodIfName:   c.Attachment.IfName,
		PodMAC:      pod.Attrs().HardwareAddr.String(),
		Gateway:     PodGateway,
	}, nil
}

// ensureForwarding turns IPv4 forwarding on in the node namespace; the host
// routes every pod packet.
func (l *Linux) ensureForwarding() error {
	if l.forwarding.Load() {
		return nil
	}
	if err := l.setSysctls(ipForward); err != nil {
		return err
	}
	l.forwarding.Store(true)
	return nil
}

// vethQueues is the number of transmit and receive queues of each end of a
// pod's veth pair. Left to itself the kernel gives a veth one of each per
// possible CPU, each registered with its own sysfs entries, and a pod's
// ADD waits for that: on a 2-CPU node one queue each way took 0.1 ms off
// creating the pair (0.49 → 0.39 ms p50, the pod end brought up as well),
// and a node with 96 CPUs would register 384 queues per pod. A veth has no
// qdisc and hands each packet to the receiving end on the sending CPU
// whatever its queue count; only XDP or GRO turned on for the veth (allot
// turns on neither) spread work over its receive queues.
const vethQueues = 1

// ensureVethPair returns the attachment's two veth ends, creating them with
// the pod end born directly inside the pod namespace under its final name.
// fresh says this call created them: nothing can route through links that
// did not exist before, and the pod end has no address yet. The host end
// is created up and with its alias, which saves a request for each.
func (l *Linux) ensureVethPair(c PodConfig, hostName string, podNS netns.NsHandle, podNL *netlink.Handle) (host, pod netlink.Link, fresh bool, err error) {
	ifName := c.Attachment.IfName
	host, err = l.nl.LinkByName(hostName)
	switch {
	case err == nil:
		if pod, ok := l.pairedPeer(host, podNS, podNL, ifName); ok {
			return host, pod, false, nil
		}
		// Ours by name but no longer paired with this pod's interface (an
		// interrupted earlier ADD, or a recreated namespace): replace it.
		if err := l.nl.LinkDel(host); err != nil && !isNotFound(err) {
			return nil, nil, false, fmt.Errorf("remove unpaired %s: %w", hostName, err)
		}
	case !isNotFound(err):
		return nil, nil, false, fmt.Errorf("look up %s: %w", hostName, err)
	}
	// One queue each way on both ends (vethQueues), where the kernel would
	// give each end one per possible CPU.
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: hostName, MTU: c.MTU, Alias: c.Attachment.alias(), Flags: net.FlagUp,
			NumTxQueues: vethQueues, NumRxQueues: vethQueues},
		PeerName:      ifName,
		PeerNamespace: netlink.NsFd(int(podNS)),
	}
	if err := l.nl.LinkAdd(veth); err != nil {
		// The host name was free just now, so a name taken is most likely
		// the pod's. Nothing was created (the kernel registers the pod end
		// first), and an interface that is not ours is never taken over.
		if errors.Is(err, unix.EEXIST) {
			if _, perr := podNL.LinkByName(ifName); perr == nil {
				return nil, nil, false, fmt.Errorf("%w: %s", ErrIfNameTaken, ifName)
			}
		}
		return nil, nil, false, fmt.Errorf("create %s with peer %s: %w", hostName, ifName, err)
	}
	if host, err = l.nl.LinkByName(hostName); err != nil {
		return nil, nil, false, fmt.Errorf("look up new %s: %w", hostName, err)
	}
	if pod, err = podNL.LinkByName(ifName); err != nil {
		return nil, nil, false, fmt.Errorf("look up new %s in pod netns: %w", ifName, err)
	}
	return host, pod, true, nil
}

// pairedPeer returns the pod's interface if it is the other end of host:
// the host end's peer lives in the pod namespace at the pod interface's
// index.
func (l *Linux) pairedPeer(host netlink.Link, podNS netns.NsHandle, podNL *netlink.Handle, ifName string) (netlink.Link, bool) {
	if host.Type() != "veth" {
		return nil, false
	}
	pod, err := podNL.LinkByName(ifName)
	if err != nil || pod.Type() != "veth" || host.Attrs().ParentIndex != pod.Attrs().Index {
		return nil, false
	}
	id, err := l.nl.GetNetNsIdByFd(int(podNS))
	if err != nil || id < 0 || id != host.Attrs().NetNsID {
		return nil, false
	}
	return pod, true
}

func (l *Linux) configureHostVeth(c PodConfig, host netlink.Link) error {
	if host.Attrs().Alias != c.Attachment.alias() {
		if err := l.nl.LinkSetAlias(host, c.Attachment.alias()); err != nil {
			return fmt.Errorf("set alias: %w", err)
		}
	}
	if c.MTU != 0 && host.Attrs().MTU != c.MTU {
		if err := l.nl.LinkSetMTU(host, c.MTU); err != nil {
			return fmt.Errorf("set mtu: %w", err)
		}
	}
	if host.Attrs().Flags&net.FlagUp == 0 {
		if err := l.nl.LinkSetUp(host); err != nil {
			return fmt.Errorf("bring up: %w", err)
		}
	}
	return nil
}

// configurePodSide gives the pod interface its /32 address (and no other),
// a link route to the fake gateway, a default route through it (both at the
// interface's metric, see podRoutePriority), and a permanent neighbour entry
// resolving the gateway to the host veth's MAC. A fresh interface has no
// address to remove.
func configurePodSide(podNL *netlink.Handle, pod netlink.Link, c PodConfig, hostMAC net.HardwareAddr, fresh bool) error {
	if c.MTU != 0 && pod.Attrs().MTU != c.MTU {
		if err := podNL.LinkSetMTU(pod, c.MTU); err != nil {
			return fmt.Errorf("set mtu: %w", err)
		}
	}
	if pod.Attrs().Flags&net.FlagUp == 0 {
		if err := podNL.LinkSetUp(pod); err != nil {
			return fmt.Errorf("bring up: %w", err)
		}
	}
	want := host32(c.Address)
	if !fresh {
		if err := dropOtherAddrs(podNL, pod, want); err != nil {
			return err
		}
	}
	if err := podNL.AddrReplace(pod, &netlink.Addr{IPNet: want}); err != nil {
		return fmt.Errorf("add address %s: %w", want, err)
	}
	idx := pod.Attrs().Index
	prio, err := podRoutePriority(podNL, idx)
	if err != nil {
		return err
	}
	gw := PodGateway.AsSlice()
	routes := []netlink.Route{
		{LinkIndex: idx, Dst: host32(PodGateway), Scope: netlink.SCOPE_LINK, Priority: prio},
		{LinkIndex: idx, Dst: prefixToIPNet(netip.PrefixFrom(netip.IPv4Unspecified(), 0)), Gw: gw,
			Scope: netlink.SCOPE_UNIVERSE, Priority: prio},
	}
	for i := range routes {
		if err := podNL.RouteReplace(&routes[i]); err != nil {
			return fmt.Errorf("set route %s: %w", ipNetString(routes[i].Dst), err)
		}
	}
	neigh := &netlink.Neigh{LinkIndex: idx, Family: unix.AF_INET, State: netlink.NUD_PERMANENT,
		IP: gw, HardwareAddr: hostMAC}
	if err := podNL.NeighSet(neigh); err != nil {
		return fmt.Errorf("set neighbour %s -> %s: %w", PodGateway, hostMAC, err)
	}
	return nil
}

// dropOtherAddrs removes the pod interface's IPv4 addresses but want.
func dropOtherAddrs(podNL *netlink.Handle, pod netlink.Link, want *net.IPNet) error {
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return podNL.AddrList(pod, unix.AF_INET) })
	if err != nil {
		return fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		if a.IPNet.String() != want.String() {
			if err := podNL.AddrDel(pod, &a); err != nil && !isNotFound(err) {
				return fmt.Errorf("remove stale address %s: %w", a.IPNet, err)
			}
		}
	}
	return nil
}

// ensureHostRouting adds the host /32 route and the pod's rules and, with
// prune, drops those left from an earlier configuration of the same
// attachment (another address, or another ENI). On a fresh veth no route
// can be left through it, and the address's source rules are replaced
// without listing every rule of the node (replaceFromRules).
func (l *Linux) ensureHostRouting(c PodConfig, host netlink.Link, prune, fresh bool) error {
	idx := host.Attrs().Index
	if prune && fresh {
		return l.routeFreshPod(c, idx)
	}
	var routes []netlink.Route
	if prune {
		var err error
		if routes, err = l.mainHostRoutes(); err != nil {
			return err
		}
	}
	for _, r := range routes {
		if r.LinkIndex != idx || r.Dst.IP.Equal(c.Address.AsSlice()) {
			continue
		}
		old, _ := netip.AddrFromSlice(r.Dst.IP)
		if err := l.nl.RouteDel(&r); err != nil && !isNotFound(err) {
			return fmt.Errorf("remove stale route %s: %w", r.Dst, err)
		}
		if err := l.deletePodRules(old.Unmap(), 0); err != nil {
			return err
		}
	}
	route := &netlink.Route{LinkIndex: idx, Dst: host32(c.Address), Scope: netlink.SCOPE_LINK, Table: mainTable}
	if err := l.nl.RouteReplace(route); err != nil {
		return fmt.Errorf("set route %s dev %s: %w", route.Dst, host.Attrs().Name, err)
	}
	if err := l.addRule(toPodRule(c.Address)); err != nil {
		return err
	}
	wantTable := RouteTable(c.DeviceIndex)
	var rules []netlink.Rule
	if prune {
		// Keep only the source rule this configuration asks for.
		var err error
		if rules, err = l.rulesAt(PriorityFromPod); err != nil {
			return err
		}
	}
	for _, r := range rules {
		if r.Src != nil && r.Src.String() == host32(c.Address).String() &&
			(c.DeviceIndex == 0 || r.Table != wantTable) {
			if err := l.nl.RuleDel(&r); err != nil && !isNotFound(err) {
				return fmt.Errorf("remove stale rule %v: %w", r, err)
			}
		}
	}
	if c.DeviceIndex > 0 {
		return l.addRule(fromPodRule(c.Address, wantTable))
	}
	return nil
}

// routeFreshPod routes a pod whose veth this call created: the host /32
// route, the `to` rule, and the address's source rule into its ENI's
// table (none on the primary ENI). A source rule an earlier owner of the
// address left (into another ENI's table, say, after a crash in its
// teardown) is replaced: the address is routed to no other interface
// (setupPod checked), so such rules are no live pod's, and this pod sends
// nothing before its ADD has answered.
func (l *Linux) routeFreshPod(c PodConfig, idx int) error {
	route := &netlink.Route{LinkIndex: idx, Dst: host32(c.Address), Scope: netlink.SCOPE_LINK, Table: mainTable}
	if err := l.nl.RouteReplace(route); err != nil {
		return fmt.Errorf("set route %s: %w", route.Dst, err)
	}
	if err := l.addRule(toPodRule(c.Address)); err != nil {
		return err
	}
	if err := l.dropFromRules(c.Address); err != nil {
		return err
	}
	if c.DeviceIndex > 0 {
		return l.addRule(fromPodRule(c.Address, RouteTable(c.DeviceIndex)))
	}
	return nil
}

// routeOwner names the interface the main table routes addr/32 through,
// or "" if there is no such route. It first asks the kernel which route a
// packet to addr takes (one lookup, whatever the number of pods): when the
// lookup ends in the main table its answer is exact, since the main
// table's longest match for addr is addr/32 if it has that route. A lookup
// that ends in another table (a rule ahead of main) or fails falls back to
// listing the main table's routes to addr.
func (l *Linux) routeOwner(addr netip.Addr) (string, error) {
	if owner, ok := l.lookupOwner(addr); ok {
		return owner, nil
	}
	routes, err := retryDump(func() ([]netlink.Route, error) {
		return l.nl.RouteListFiltered(unix.AF_INET, &netlink.Route{Dst: host32(addr), Table: mainTable},
			netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return "", fmt.Errorf("list routes to %s: %w", addr, err)
	}
	for _, r := range routes {
		link, err := l.nl.LinkByIndex(r.LinkIndex)
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return "", fmt.Errorf("look up link %d: %w", r.LinkIndex, err)
		}
		return link.Attrs().Name, nil
	}
	return "", nil
}

// lookupOwner is routeOwner by the kernel's route lookup for addr (the
// route it matched, not one made for addr); ok is false when the lookup
// cannot say.
func (l *Linux) lookupOwner(addr netip.Addr) (owner string, ok bool) {
	routes, err := l.nl.RouteGetWithOptions(addr.AsSlice(), &netlink.RouteGetOptions{FIBMatch: true})
	if err != nil || len(routes) != 1 || routes[0].Table != mainTable {
		return "", false
	}
	r := routes[0]
	if r.Dst == nil || !r.Dst.IP.Equal(addr.AsSlice()) {
		return "", true
	}
	if ones, bits := r.Dst.Mask.Size(); ones != 32 || bits != 32 {
		return "", true
	}
	link, err := l.nl.LinkByIndex(r.LinkIndex)
	if err != nil {
		return "", false
	}
	return link.Attrs().Name, true
}

// mainHostRoutes lists the main table's /32 routes.
func (l *Linux) mainHostRoutes() ([]netlink.Route, error) {
	routes, err := l.tableRoutes(mainTable)
	if err != nil {
		return nil, err
	}
	out := routes[:0]
	for _, r := range routes {
		if r.Dst != nil && r.Dst.IP.To4() != nil {
			if ones, bits := r.Dst.Mask.Size(); ones == 32 && bits == 32 {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func isOurVeth(link netlink.Link) bool {
	return link.Type() == "veth" && strings.HasPrefix(link.Attrs().Name, VethPrefix)
}

// ensureHostNeighbour resolves the pod address to the pod interface's MAC
// permanently on the host veth, the mirror of the pod's entry for the
// gateway: the host never has to ARP for a pod, and a stale entry from an
// earlier pod with the same address can't linger. It goes away with the
// veth on teardown.
func (l *Linux) ensureHostNeighbour(c PodConfig, host netlink.Link, podMAC net.HardwareAddr) error {
	neigh := &netlink.Neigh{LinkIndex: host.Attrs().Index, Family: unix.AF_INET, State: netlink.NUD_PERMANENT,
		IP: c.Address.AsSlice(), HardwareAddr: podMAC}
	if err := l.nl.NeighSet(neigh); err != nil {
		return fmt.Errorf("set neighbour %s -> %s on %s: %w", c.Address, podMAC, host.Attrs().Name, err)
	}
	return nil
}
