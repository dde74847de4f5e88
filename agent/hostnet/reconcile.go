package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Reconcile checks every desired pod and restores the missing pieces of
// those whose namespace still exists (as SetupPod does, reusing a paired
// veth, but without pruning anything). It then reports, without deleting, our veths, per-pod rules
// and veth routes that no desired pod accounts for. Missing evidence is not
// evidence of absence: a pod whose namespace is gone is only reported, and
// nothing is removed until the caller passes the report to RemoveStray.
//
// desired must include attachments whose ADD is in flight in the caller,
// and the caller must not tear down a desired pod while Reconcile runs, or
// Reconcile may restore it.
func (l *Linux) Reconcile(desired []PodConfig) (Report, error) {
	var rep Report
	wantVeth := map[string]PodConfig{}
	wantTo := map[netip.Addr]bool{}
	wantFrom := map[netip.Addr]int{}
	for _, c := range desired {
		if c.Attachment.Validate() == nil {
			wantVeth[HostVethName(c.Attachment)] = c
		}
		if c.Address.IsValid() {
			wantTo[c.Address] = true
			if c.DeviceIndex > 0 {
				wantFrom[c.Address] = RouteTable(c.DeviceIndex)
			}
		}
		l.reconcilePod(c, &rep)
	}

	links, err := retryDump(l.nl.LinkList)
	if err != nil {
		return rep, fmt.Errorf("reconcile: list links: %w", err)
	}
	ours := map[int]netlink.Link{}
	for _, link := range links {
		if !isOurVeth(link) {
			continue
		}
		ours[link.Attrs().Index] = link
		name := link.Attrs().Name
		if _, ok := wantVeth[name]; ok || l.isSettingUp(name) {
			continue
		}
		a, _ := parseAlias(link.Attrs().Alias)
		rep.StrayLinks = append(rep.StrayLinks, StrayLink{Name: name, Index: link.Attrs().Index, Attachment: a})
	}

	rules, err := l.allRules()
	if err != nil {
		return rep, fmt.Errorf("reconcile: %w", err)
	}
	for _, r := range rules {
		switch r.Priority {
		case PriorityToPod:
			if a, ok := host32Addr(r.Dst); !ok || !wantTo[a] || r.Src != nil || r.Table != mainTable {
				rep.StrayRules = append(rep.StrayRules, strayRule(r))
			}
		case PriorityFromPod:
			if a, ok := host32Addr(r.Src); !ok || wantFrom[a] != r.Table || r.Dst != nil {
				rep.StrayRules = append(rep.StrayRules, strayRule(r))
			}
		}
	}

	routes, err := l.mainHostRoutes()
	if err != nil {
		return rep, fmt.Errorf("reconcile: %w", err)
	}
	for _, r := range routes {
		link, ok := ours[r.LinkIndex]
		if !ok {
			continue
		}
		c, desiredLink := wantVeth[link.Attrs().Name]
		if !desiredLink {
			continue // goes with the stray link
		}
		if a, _ := host32Addr(r.Dst); a != c.Address {
			rep.StrayRoutes = append(rep.StrayRoutes, StrayRoute{Dst: a, LinkName: link.Attrs().Name, LinkIndex: r.LinkIndex})
		}
	}
	return rep, nil
}

// reconcilePod checks one desired pod and restores it if pieces are missing.
func (l *Linux) reconcilePod(c PodConfig, rep *Report) {
	if err := c.Validate(); err != nil {
		rep.Failed = append(rep.Failed, PodFailure{Attachment: c.Attachment, Err: err.Error()})
		return
	}
	ns, err := openNetNS(c.NetNS)
	if errors.Is(err, ErrNetNSGone) {
		rep.NetNSGone = append(rep.NetNSGone, c.Attachment)
		return
	}
	if err != nil {
		rep.Failed = append(rep.Failed, PodFailure{Attachment: c.Attachment, Err: err.Error()})
		return
	}
	ns.Close()
	err = l.CheckPod(c)
	var ce *CheckError
	switch {
	case err == nil:
		return
	case !errors.As(err, &ce):
		rep.Failed = append(rep.Failed, PodFailure{Attachment: c.Attachment, Err: err.Error()})
		return
	}
	if _, err := l.setupPod(c, false); err != nil {
		rep.Failed = append(rep.Failed, PodFailure{Attachment: c.Attachment, Err: err.Error()})
		return
	}
	l.log.Info("pod network restored", "attachment", c.Attachment.String(), "missing", strings.Join(ce.Missing, "; "))
	rep.Repaired = append(rep.Repaired, Repair{Attachment: c.Attachment, Missing: ce.Missing})
}

func strayRule(r netlink.Rule) StrayRule {
	s := StrayRule{Priority: r.Priority, Table: r.Table}
	if r.Src != nil {
		s.Src = ipNetToPrefix(r.Src)
	}
	if r.Dst != nil {
		s.Dst = ipNetToPrefix(r.Dst)
	}
	return s
}

// host32Addr returns the address of an IPv4 /32, and false for anything
// else (including nil).
func host32Addr(n *net.IPNet) (netip.Addr, bool) {
	if n == nil {
		return netip.Addr{}, false
	}
	p := ipNetToPrefix(n)
	if !p.IsValid() || p.Bits() != 32 || !p.Addr().Is4() {
		return netip.Addr{}, false
	}
	return p.Addr(), true
}

// RemoveStray deletes what a Reconcile report called stray. A link is
// deleted only if it still has the reported index and is not being set up
// right now, so a pod wired since the report is never hit; rules and routes
// are deleted by their exact selectors. Everything is attempted; the errors
// are joined.
func (l *Linux) RemoveStray(rep Report) error {
	var errs []error
	for _, s := range rep.StrayLinks {
		link, err := l.nl.LinkByName(s.Name)
		if err != nil {
			if !isNotFound(err) {
				errs = append(errs, fmt.Errorf("look up stray %s: %w", s.Name, err))
			}
			continue
		}
		if link.Attrs().Index != s.Index || !isOurVeth(link) || l.isSettingUp(s.Name) {
			continue
		}
		if err := l.nl.LinkDel(link); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("delete stray %s: %w", s.Name, err))
		}
	}
	for _, s := range rep.StrayRules {
		if s.Priority != PriorityToPod && s.Priority != PriorityFromPod {
			errs = append(errs, fmt.Errorf("refusing to delete rule at priority %d: not a per-pod priority", s.Priority))
			continue
		}
		r := netlink.NewRule()
		r.Family = unix.AF_INET
		r.Priority = s.Priority
		r.Table = s.Table
		if s.Src.IsValid() {
			r.Src = prefixToIPNet(s.Src)
		}
		if s.Dst.IsValid() {
			r.Dst = prefixToIPNet(s.Dst)
		}
		if err := l.nl.RuleDel(r); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("delete stray rule %v: %w", r, err))
		}
	}
	for _, s := range rep.StrayRoutes {
		// SCOPE_NOWHERE: match the route whatever its scope.
		r := &netlink.Route{LinkIndex: s.LinkIndex, Dst: host32(s.Dst), Table: mainTable, Scope: netlink.SCOPE_NOWHERE}
		if err := l.nl.RouteDel(r); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("delete stray route %s dev %s: %w", s.Dst, s.LinkName, err))
		}
	}
	return errors.Join(errs...)
}

// ListPods lists our host veths with the addresses routed through them, the
// tables their source rules point at and the attachment from their alias.
func (l *Linux) ListPods() ([]PodInfo, error) {
	links, err := retryDump(l.nl.LinkList)
	if err != nil {
		return nil, fmt.Errorf("list pods: list links: %w", err)
	}
	routes, err := l.mainHostRoutes()
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	rules, err := l.rulesAt(PriorityFromPod)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	tables := map[netip.Addr][]int{}
	for _, r := range rules {
		if a, ok := host32Addr(r.Src); ok {
			tables[a] = append(tables[a], r.Table)
		}
	}
	var pods []PodInfo
	for _, link := range links {
		if !isOurVeth(link) {
			continue
		}
		p := PodInfo{HostVeth: link.Attrs().Name, HostVethMAC: link.Attrs().HardwareAddr.String()}
		p.Attachment, _ = parseAlias(link.Attrs().Alias)
		for _, r := range routes {
			if r.LinkIndex != link.Attrs().Index {
				continue
			}
			if a, ok := host32Addr(r.Dst); ok {
				p.Addresses = append(p.Addresses, a)
				p.Tables = append(p.Tables, tables[a]...)
			}
		}
		slices.SortFunc(p.Addresses, netip.Addr.Compare)
		slices.Sort(p.Tables)
		pods = append(pods, p)
	}
	slices.SortFunc(pods, func(a, b PodInfo) int { return strings.Compare(a.HostVeth, b.HostVeth) })
	return pods, nil
}
