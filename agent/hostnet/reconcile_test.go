package hostnet

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestReconcileRestoresAndReportsStrays drifts a node every way Reconcile
// knows about, checks the report item by item, that nothing was removed
// before RemoveStray, and that afterwards a second Reconcile finds nothing.
func TestReconcileRestoresAndReportsStrays(t *testing.T) {
	n := newTestNode(t)
	n.setupENIs()
	a := n.addPod("pa", "10.0.0.20", 0)
	c := n.addPod("pc", "10.0.1.20", 1)
	gone := n.addPod("gone", "10.0.0.22", 0)
	extra := n.addPod("extra", "10.0.0.23", 0) // wired, but no longer desired

	// Drift: lost rules, a lost pod route, a stray device, a stray rule, a
	// stray route through a live pod's veth, and a vanished namespace.
	mustDelRule(t, n, toPodRule(a.cfg.Address))
	mustDelRule(t, n, fromPodRule(c.cfg.Address, 2))
	eth0, _ := c.ns.NL.LinkByName("eth0")
	if err := c.ns.NL.RouteDel(&netlink.Route{LinkIndex: eth0.Attrs().Index,
		Dst: prefixToIPNet(netip.MustParsePrefix("0.0.0.0/0")), Gw: PodGateway.AsSlice()}); err != nil {
		t.Fatal(err)
	}
	spare := newNS(t, "spare")
	strayLink, _ := veth(t, n.node, VethPrefix+"0123456789a", "", spare, "x0")
	if err := n.node.NL.RuleAdd(toPodRule(netip.MustParseAddr("10.0.9.9"))); err != nil {
		t.Fatal(err)
	}
	aHost, _ := n.node.NL.LinkByName(a.res.HostVeth)
	mustRoute(t, n.node.NL, &netlink.Route{LinkIndex: aHost.Attrs().Index, Dst: host32(netip.MustParseAddr("10.0.0.99")),
		Scope: netlink.SCOPE_LINK})
	deleteNS(t, gone.ns)
	waitLinkGone(t, n.node, gone.res.HostVeth)

	desired := []PodConfig{a.cfg, c.cfg, gone.cfg}
	rep, err := n.net.Reconcile(desired)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if len(rep.Failed) != 0 {
		t.Errorf("Failed: %+v", rep.Failed)
	}
	repaired := map[Attachment]string{}
	for _, r := range rep.Repaired {
		repaired[r.Attachment] = strings.Join(r.Missing, "; ")
	}
	if len(repaired) != 2 ||
		!strings.Contains(repaired[a.cfg.Attachment], "rule 512: to 10.0.0.20/32 lookup main") ||
		!strings.Contains(repaired[c.cfg.Attachment], "rule 1536: from 10.0.1.20/32 lookup 2") ||
		!strings.Contains(repaired[c.cfg.Attachment], "pod route default via 169.254.1.1") {
		t.Errorf("Repaired = %q, want pa (its to rule) and pc (its from rule and default route)", repaired)
	}
	if !slices.Equal(rep.NetNSGone, []Attachment{gone.cfg.Attachment}) {
		t.Errorf("NetNSGone = %v, want [%v]", rep.NetNSGone, gone.cfg.Attachment)
	}
	wantLinks := []StrayLink{
		{Name: strayLink.Attrs().Name, Index: strayLink.Attrs().Index},
		{Name: extra.res.HostVeth, Index: linkIndex(t, n, extra.res.HostVeth), Attachment: extra.cfg.Attachment},
	}
	slices.SortFunc(wantLinks, func(x, y StrayLink) int { return strings.Compare(x.Name, y.Name) })
	gotLinks := slices.Clone(rep.StrayLinks)
	slices.SortFunc(gotLinks, func(x, y StrayLink) int { return strings.Compare(x.Name, y.Name) })
	if !slices.Equal(gotLinks, wantLinks) {
		t.Errorf("StrayLinks = %+v, want %+v", gotLinks, wantLinks)
	}
	wantRules := []StrayRule{
		{Priority: PriorityToPod, Dst: netip.MustParsePrefix("10.0.0.23/32"), Table: mainTable},
		{Priority: PriorityToPod, Dst: netip.MustParsePrefix("10.0.9.9/32"), Table: mainTable},
	}
	gotRules := slices.Clone(rep.StrayRules)
	slices.SortFunc(gotRules, func(x, y StrayRule) int { return x.Dst.Addr().Compare(y.Dst.Addr()) })
	if !slices.Equal(gotRules, wantRules) {
		t.Errorf("StrayRules = %+v, want %+v", gotRules, wantRules)
	}
	wantRoutes := []StrayRoute{{Dst: netip.MustParseAddr("10.0.0.99"), LinkName: a.res.HostVeth, LinkIndex: aHost.Attrs().Index}}
	if !slices.Equal(rep.StrayRoutes, wantRoutes) {
		t.Errorf("StrayRoutes = %+v, want %+v", rep.StrayRoutes, wantRoutes)
	}

	for _, p := range []*testPod{a, c} {
		if err := n.net.CheckPod(p.cfg); err != nil {
			t.Errorf("CheckPod(%v) after Reconcile: %v", p.cfg.Attachment, err)
		}
	}
	if err := ping(c.ns, a.cfg.Address); err != nil {
		t.Errorf("repaired pods: %v", err)
	}
	// Reporting removed nothing.
	if err := n.net.CheckPod(extra.cfg); err != nil {
		t.Errorf("Reconcile touched an undesired pod before RemoveStray: %v", err)
	}

	if err := n.net.RemoveStray(rep); err != nil {
		t.Fatalf("RemoveStray: %v", err)
	}
	for _, name := range []string{strayLink.Attrs().Name, extra.res.HostVeth} {
		if _, err := n.node.NL.LinkByName(name); err == nil {
			t.Errorf("stray %s survived RemoveStray", name)
		}
	}
	// The runtime's DEL for the vanished pod comes in; then all is clean.
	if err := n.net.TeardownPod(gone.cfg); err != nil {
		t.Fatalf("TeardownPod(gone): %v", err)
	}
	rep, err = n.net.Reconcile([]PodConfig{a.cfg, c.cfg})
	if err != nil {
		t.Fatalf("second Reconcile: %v", err)
	}
	if !rep.Empty() {
		t.Errorf("second Reconcile found %+v, want nothing", rep)
	}
	pods, err := n.net.ListPods()
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	var got []string
	for _, p := range pods {
		got = append(got, p.Attachment.ContainerID+" "+p.Addresses[0].String())
	}
	slices.Sort(got)
	if want := []string{a.cfg.Attachment.ContainerID + " 10.0.0.20", c.cfg.Attachment.ContainerID + " 10.0.1.20"}; !slices.Equal(got, want) {
		t.Errorf("ListPods = %q, want %q", got, want)
	}
}

// TestReconcileSparesVethsBeingSetUp: a veth whose SetupPod is still
// running is not yet in the caller's records, and must not be called stray.
func TestReconcileSparesVethsBeingSetUp(t *testing.T) {
	n := newTestNode(t)
	spare := newNS(t, "spare")
	name := VethPrefix + "inflight000"
	veth(t, n.node, name, "", spare, "x0")
	done := n.net.beginSetup(name)
	rep, err := n.net.Reconcile(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.StrayLinks) != 0 {
		t.Errorf("a veth being set up was reported stray: %+v", rep.StrayLinks)
	}
	done()
	rep, err = n.net.Reconcile(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.StrayLinks) != 1 || rep.StrayLinks[0].Name != name {
		t.Errorf("after setup ended: StrayLinks = %+v, want %s", rep.StrayLinks, name)
	}
}

// TestSetupENIWithoutItsLink fails with ErrLinkNotFound once LinkWait is up.
func TestSetupENIWithoutItsLink(t *testing.T) {
	n := newTestNode(t)
	err := n.net.SetupENI(ENIConfig{MAC: "02:a1:00:00:00:99", DeviceIndex: 2,
		PrimaryIP: netip.MustParseAddr("10.0.2.10"), Subnet: netip.MustParsePrefix("10.0.2.0/24")})
	if err == nil || !strings.Contains(err.Error(), "02:a1:00:00:00:99") {
		t.Fatalf("SetupENI for an absent MAC: %v", err)
	}
	if !errors.Is(err, ErrLinkNotFound) {
		t.Errorf("SetupENI for an absent MAC: %v, want ErrLinkNotFound", err)
	}
	routes, _ := n.node.NL.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: 3}, netlink.RT_FILTER_TABLE)
	if len(routes) != 0 {
		t.Errorf("failed SetupENI left routes in table 3: %v", routes)
	}
}

func mustDelRule(t *testing.T, n *testNode, r *netlink.Rule) {
	t.Helper()
	if err := n.node.NL.RuleDel(r); err != nil {
		t.Fatalf("delete rule %v: %v", r, err)
	}
}

func linkIndex(t *testing.T, n *testNode, name string) int {
	t.Helper()
	l, err := n.node.NL.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Index
}

// TestSetupENIMovesSubnetRouteOutOfMain: a secondary ENI whose address was
// configured the ordinary way (by the OS, say) has its subnet route in main,
// which would send host traffic out of the wrong ENI. SetupENI moves it into
// the ENI's table.
func TestSetupENIMovesSubnetRouteOutOfMain(t *testing.T) {
	n := newTestNode(t)
	ens6, _ := n.node.NL.LinkByName("ens6")
	mustAddr(t, n.node.NL, ens6, "10.0.1.10/24")
	if err := n.node.NL.LinkSetUp(ens6); err != nil {
		t.Fatal(err)
	}
	if err := n.net.SetupENI(n.secondary); err != nil {
		t.Fatalf("SetupENI: %v", err)
	}
	routes, _ := n.node.NL.RouteList(ens6, unix.AF_INET)
	for _, r := range routes {
		if r.Table == mainTable {
			t.Errorf("main-table route left on the secondary ENI: %v", r)
		}
	}
	addrs, _ := n.node.NL.AddrList(ens6, unix.AF_INET)
	if len(addrs) != 1 || addrs[0].IPNet.String() != "10.0.1.10/24" {
		t.Errorf("ens6 addresses %v, want only 10.0.1.10/24", addrs)
	}
}
