package hostnet

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// CheckError lists what CheckPod found missing or wrong, each piece named
// the way `ip` would show it.
type CheckError struct {
	Attachment Attachment
	Missing    []string
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("pod network of %v is incomplete: missing %s", e.Attachment, strings.Join(e.Missing, "; "))
}

// CheckPod verifies every piece SetupPod adds. Pieces that are missing or
// wrong come back together in a *CheckError; any other error means the
// check itself could not run.
func (l *Linux) CheckPod(c PodConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	var missing []string
	miss := func(format string, args ...any) { missing = append(missing, fmt.Sprintf(format, args...)) }
	hostName := HostVethName(c.Attachment)
	host, err := l.nl.LinkByName(hostName)
	switch {
	case err == nil:
		if host.Type() != "veth" {
			miss("host veth %s (it is a %s)", hostName, host.Type())
		} else if host.Attrs().Flags&net.FlagUp == 0 {
			miss("host veth %s up", hostName)
		}
	case isNotFound(err):
		miss("host veth %s", hostName)
		host = nil
	default:
		return fmt.Errorf("check pod %v: look up %s: %w", c.Attachment, hostName, err)
	}

	podMAC, err := l.checkPodSide(c, host, miss)
	if err != nil {
		return fmt.Errorf("check pod %v: %w", c.Attachment, err)
	}
	if host != nil && podMAC != nil {
		neighs, err := retryDump(func() ([]netlink.Neigh, error) { return l.nl.NeighList(host.Attrs().Index, unix.AF_INET) })
		if err != nil {
			return fmt.Errorf("check pod %v: list host neighbours: %w", c.Attachment, err)
		}
		var ok bool
		for _, n := range neighs {
			if n.IP.Equal(c.Address.AsSlice()) && n.State&netlink.NUD_PERMANENT != 0 && bytes.Equal(n.HardwareAddr, podMAC) {
				ok = true
			}
		}
		if !ok {
			miss("host neighbour %s lladdr %s PERMANENT on %s", c.Address, podMAC, hostName)
		}
	}

	owner, err := l.routeOwner(c.Address)
	if err != nil {
		return fmt.Errorf("check pod %v: %w", c.Attachment, err)
	}
	if owner != hostName {
		miss("host route %s/32 dev %s", c.Address, hostName)
	}
	rules, err := l.allRules()
	if err != nil {
		return fmt.Errorf("check pod %v: %w", c.Attachment, err)
	}
	if !hasRule(rules, toPodRule(c.Address)) {
		miss("rule %d: to %s/32 lookup main", PriorityToPod, c.Address)
	}
	if c.DeviceIndex > 0 {
		table := RouteTable(c.DeviceIndex)
		if !hasRule(rules, fromPodRule(c.Address, table)) {
			miss("rule %d: from %s/32 lookup %d", PriorityFromPod, c.Address, table)
		}
		routes, err := l.tableRoutes(table)
		if err != nil {
			return fmt.Errorf("check pod %v: %w", c.Attachment, err)
		}
		if !hasDefaultRoute(routes) {
			miss("default route in ENI table %d (device %d)", table, c.DeviceIndex)
		}
	}
	if len(missing) > 0 {
		return &CheckError{Attachment: c.Attachment, Missing: missing}
	}
	return nil
}

// checkPodSide verifies the pod's end: paired with host (when there is
// one), up, holding exactly its address, its two routes and the permanent
// neighbour entry for the gateway. It returns the pod interface's MAC when
// the interface exists.
func (l *Linux) checkPodSide(c PodConfig, host netlink.Link, miss func(string, ...any)) (net.HardwareAddr, error) {
	ifName := c.Attachment.IfName
	podNS, err := openNetNS(c.NetNS)
	if errors.Is(err, ErrNetNSGone) {
		miss("pod netns %s", c.NetNS)
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	defer podNS.Close()
	podNL, err := netlink.NewHandleAt(podNS, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open netlink in pod netns: %w", err)
	}
	defer podNL.Close()
	pod, err := podNL.LinkByName(ifName)
	if err != nil {
		if isNotFound(err) {
			miss("pod interface %s", ifName)
			return nil, nil
		}
		return nil, fmt.Errorf("look up %s in pod netns: %w", ifName, err)
	}
	if host != nil {
		if _, ok := l.pairedPeer(host, podNS, podNL, ifName); !ok {
			miss("veth pair %s <-> %s", host.Attrs().Name, ifName)
		}
	}
	if pod.Attrs().Flags&net.FlagUp == 0 {
		miss("pod interface %s up", ifName)
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return podNL.AddrList(pod, unix.AF_INET) })
	if err != nil {
		return nil, fmt.Errorf("list pod addresses: %w", err)
	}
	if !hasAddr(addrs, host32(c.Address)) {
		miss("pod address %s/32 on %s", c.Address, ifName)
	}
	routes, err := retryDump(func() ([]netlink.Route, error) { return podNL.RouteList(pod, unix.AF_INET) })
	if err != nil {
		return nil, fmt.Errorf("list pod routes: %w", err)
	}
	var gwRoute, defRoute bool
	for _, r := range routes {
		if r.Dst != nil && r.Dst.String() == host32(PodGateway).String() && r.Scope == netlink.SCOPE_LINK {
			gwRoute = true
		}
		if ipNetString(r.Dst) == "0.0.0.0/0" && r.Gw.Equal(PodGateway.AsSlice()) {
			defRoute = true
		}
	}
	if !gwRoute {
		miss("pod route %s dev %s scope link", PodGateway, ifName)
	}
	if !defRoute {
		miss("pod route default via %s dev %s", PodGateway, ifName)
	}
	neighs, err := retryDump(func() ([]netlink.Neigh, error) { return podNL.NeighList(pod.Attrs().Index, unix.AF_INET) })
	if err != nil {
		return nil, fmt.Errorf("list pod neighbours: %w", err)
	}
	var neighOK bool
	for _, n := range neighs {
		if n.IP.Equal(PodGateway.AsSlice()) && n.State&netlink.NUD_PERMANENT != 0 &&
			(host == nil || bytes.Equal(n.HardwareAddr, host.Attrs().HardwareAddr)) {
			neighOK = true
		}
	}
	if !neighOK {
		miss("pod neighbour %s lladdr <host veth MAC> PERMANENT on %s", PodGateway, ifName)
	}
	return pod.Attrs().HardwareAddr, nil
}

func hasAddr(addrs []netlink.Addr, want *net.IPNet) bool {
	for _, a := range addrs {
		if a.IPNet.String() == want.String() {
			return true
		}
	}
	return false
}

// hasRule reports whether rules holds one with want's priority, table and
// selectors.
func hasRule(rules []netlink.Rule, want *netlink.Rule) bool {
	for _, r := range rules {
		if r.Priority == want.Priority && r.Table == want.Table &&
			ipNetString(r.Src) == ipNetString(want.Src) && ipNetString(r.Dst) == ipNetString(want.Dst) {
			return true
		}
	}
	return false
}

func hasDefaultRoute(routes []netlink.Route) bool {
	for _, r := range routes {
		if ipNetString(r.Dst) == "0.0.0.0/0" && r.Gw != nil {
			return true
		}
	}
	return false
}
