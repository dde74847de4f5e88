package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestSetupPodWiresBothSides wires four pods, two on each ENI, and checks
// every piece on both sides, then real traffic between them, to the node,
// and through the secondary ENI into the VPC.
func TestSetupPodWiresBothSides(t *testing.T) {
	n := newTestNode(t)
	n.setupENIs()
	a := n.addPod("pa", "10.0.0.20", 0)
	b := n.addPod("pb", "10.0.0.21", 0)
	c := n.addPod("pc", "10.0.1.20", 1)
	d := n.addPod("pd", "10.0.1.21", 1)
	pods := []*testPod{a, b, c, d}

	// A second SetupPod converges without recreating anything.
	for _, p := range pods {
		before, _ := n.node.NL.LinkByName(p.res.HostVeth)
		res, err := n.net.SetupPod(p.cfg)
		if err != nil {
			t.Fatalf("second SetupPod(%v): %v", p.cfg.Attachment, err)
		}
		after, _ := n.node.NL.LinkByName(p.res.HostVeth)
		if res != p.res || before.Attrs().Index != after.Attrs().Index {
			t.Errorf("second SetupPod changed the pod: %+v (index %d) then %+v (index %d)",
				p.res, before.Attrs().Index, res, after.Attrs().Index)
		}
	}

	rules, err := n.node.NL.RuleList(unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		assertHostSide(t, n, p, rules)
		assertPodSide(t, n, p)
		if err := n.net.CheckPod(p.cfg); err != nil {
			t.Errorf("CheckPod(%v): %v", p.cfg.Attachment, err)
		}
	}
	assertENISetup(t, n)

	for _, tc := range []struct {
		name string
		from *testPod
		to   netip.Addr
	}{
		{"pod to pod, primary ENI", a, b.cfg.Address},
		{"pod to pod, primary to secondary ENI", a, c.cfg.Address},
		{"pod to pod, secondary ENI", d, c.cfg.Address},
		{"pod to node", a, nodeIP},
		{"secondary-ENI pod to node", c, nodeIP},
		{"secondary-ENI pod to the VPC through its ENI", c, netip.MustParseAddr("10.0.1.1")},
	} {
		if err := ping(tc.from.ns, tc.to); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func assertHostSide(t *testing.T, n *testNode, p *testPod, rules []netlink.Rule) {
	t.Helper()
	name := HostVethName(p.cfg.Attachment)
	if p.res.HostVeth != name || len(name) != 14 || !strings.HasPrefix(name, VethPrefix) {
		t.Errorf("host veth %q, want %q (prefix %q, 14 chars)", p.res.HostVeth, name, VethPrefix)
	}
	host, err := n.node.NL.LinkByName(name)
	if err != nil {
		t.Fatalf("host veth %s: %v", name, err)
	}
	if host.Type() != "veth" || host.Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("host veth %s: type %s flags %v, want an up veth", name, host.Type(), host.Attrs().Flags)
	}
	if q := host.Attrs(); q.NumTxQueues != vethQueues || q.NumRxQueues != vethQueues {
		t.Errorf("host veth %s: %d transmit and %d receive queues, want %d of each", name, q.NumTxQueues, q.NumRxQueues, vethQueues)
	}
	if got, ok := parseAlias(host.Attrs().Alias); !ok || got != p.cfg.Attachment {
		t.Errorf("host veth alias %q, want the attachment %v", host.Attrs().Alias, p.cfg.Attachment)
	}
	if host.Attrs().HardwareAddr.String() != p.res.HostVethMAC {
		t.Errorf("result host MAC %s, link has %s", p.res.HostVethMAC, host.Attrs().HardwareAddr)
	}
	routes, err := n.node.NL.RouteListFiltered(unix.AF_INET,
		&netlink.Route{Dst: host32(p.cfg.Address), Table: mainTable}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil || len(routes) != 1 || routes[0].LinkIndex != host.Attrs().Index || routes[0].Scope != netlink.SCOPE_LINK {
		t.Errorf("host route to %s: %+v (%v), want one link-scope route via %s", p.cfg.Address, routes, err, name)
	}
	var to, from []netlink.Rule
	for _, r := range rules {
		if r.Dst != nil && r.Dst.String() == host32(p.cfg.Address).String() {
			to = append(to, r)
		}
		if r.Src != nil && r.Src.String() == host32(p.cfg.Address).String() {
			from = append(from, r)
		}
	}
	if len(to) != 1 || to[0].Priority != PriorityToPod || to[0].Table != mainTable {
		t.Errorf("rules to %s: %v, want one `%d: to %s lookup main`", p.cfg.Address, to, PriorityToPod, p.cfg.Address)
	}
	switch {
	case p.cfg.DeviceIndex == 0 && len(from) != 0:
		t.Errorf("primary-ENI pod %s has source rules %v", p.cfg.Address, from)
	case p.cfg.DeviceIndex > 0 && (len(from) != 1 || from[0].Priority != PriorityFromPod || from[0].Table != 2):
		t.Errorf("rules from %s: %v, want one `%d: from %s lookup 2`", p.cfg.Address, from, PriorityFromPod, p.cfg.Address)
	}
}

func assertPodSide(t *testing.T, n *testNode, p *testPod) {
	t.Helper()
	pod, err := p.ns.NL.LinkByName("eth0")
	if err != nil {
		t.Fatalf("pod eth0: %v", err)
	}
	if pod.Type() != "veth" || pod.Attrs().Flags&net.FlagUp == 0 || pod.Attrs().HardwareAddr.String() != p.res.PodMAC {
		t.Errorf("pod eth0: type %s flags %v mac %s, want an up veth with mac %s",
			pod.Type(), pod.Attrs().Flags, pod.Attrs().HardwareAddr, p.res.PodMAC)
	}
	if q := pod.Attrs(); q.NumTxQueues != vethQueues || q.NumRxQueues != vethQueues {
		t.Errorf("pod eth0: %d transmit and %d receive queues, want %d of each", q.NumTxQueues, q.NumRxQueues, vethQueues)
	}
	addrs, _ := p.ns.NL.AddrList(pod, unix.AF_INET)
	if len(addrs) != 1 || addrs[0].IPNet.String() != p.cfg.Address.String()+"/32" {
		t.Errorf("pod addresses %v, want only %s/32", addrs, p.cfg.Address)
	}
	routes, _ := p.ns.NL.RouteList(pod, unix.AF_INET)
	var got []string
	for _, r := range routes {
		got = append(got, ipNetString(r.Dst)+" via "+r.Gw.String())
	}
	slices.Sort(got)
	want := []string{"0.0.0.0/0 via 169.254.1.1", "169.254.1.1/32 via <nil>"}
	if !slices.Equal(got, want) {
		t.Errorf("pod routes %v, want %v", got, want)
	}
	neighs, _ := p.ns.NL.NeighList(pod.Attrs().Index, unix.AF_INET)
	var ok bool
	for _, nb := range neighs {
		if nb.IP.Equal(PodGateway.AsSlice()) && nb.State == netlink.NUD_PERMANENT &&
			nb.HardwareAddr.String() == p.res.HostVethMAC {
			ok = true
		}
	}
	if !ok {
		t.Errorf("pod neighbours %+v, want %s lladdr %s PERMANENT", neighs, PodGateway, p.res.HostVethMAC)
	}
	// The host side mirrors it: the pod address resolves permanently to
	// the pod interface's MAC on the host veth.
	host, err := n.node.NL.LinkByName(p.res.HostVeth)
	if err != nil {
		t.Fatalf("host veth: %v", err)
	}
	hostNeighs, _ := n.node.NL.NeighList(host.Attrs().Index, unix.AF_INET)
	ok = false
	for _, nb := range hostNeighs {
		if nb.IP.Equal(p.cfg.Address.AsSlice()) && nb.State == netlink.NUD_PERMANENT &&
			nb.HardwareAddr.String() == p.res.PodMAC {
			ok = true
		}
	}
	if !ok {
		t.Errorf("host neighbours %+v, want %s lladdr %s PERMANENT", hostNeighs, p.cfg.Address, p.res.PodMAC)
	}
}

func assertENISetup(t *testing.T, n *testNode) {
	t.Helper()
	ens6, err := n.node.NL.LinkByName("ens6")
	if err != nil {
		t.Fatal(err)
	}
	routes, _ := n.node.NL.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: 2}, netlink.RT_FILTER_TABLE)
	var got []string
	for _, r := range routes {
		if r.LinkIndex != ens6.Attrs().Index {
			t.Errorf("table 2 route %v is not via ens6", r)
		}
		got = append(got, ipNetString(r.Dst)+" via "+r.Gw.String())
	}
	slices.Sort(got)
	if want := []string{"0.0.0.0/0 via 10.0.1.1", "10.0.1.0/24 via <nil>"}; !slices.Equal(got, want) {
		t.Errorf("ENI table 2: %v, want %v", got, want)
	}
	main, _ := n.node.NL.RouteList(ens6, unix.AF_INET)
	for _, r := range main {
		if r.Table == mainTable {
			t.Errorf("secondary ENI has a main-table route %v; its subnet belongs in table 2", r)
		}
	}
	for _, link := range []string{"ens5", "ens6"} {
		l, _ := n.node.NL.LinkByName(link)
		if l.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("%s is down", link)
		}
		if v, err := n.net.readSysctl("net/ipv4/conf/" + link + "/rp_filter"); err != nil || v != "2" {
			t.Errorf("%s rp_filter = %q (%v), want 2 (loose)", link, v, err)
		}
	}
	if v, err := n.net.readSysctl("net/ipv4/ip_forward"); err != nil || v != "1" {
		t.Errorf("ip_forward = %q (%v), want 1", v, err)
	}
}

// TestCheckPodNamesWhatIsMissing removes pieces one side at a time and
// expects CheckPod to name each of them; SetupPod then restores them.
func TestCheckPodNamesWhatIsMissing(t *testing.T) {
	n := newTestNode(t)
	n.setupENIs()
	p := n.addPod("pc", "10.0.1.20", 1)
	if err := n.net.CheckPod(p.cfg); err != nil {
		t.Fatalf("CheckPod on a fresh pod: %v", err)
	}

	host, _ := n.node.NL.LinkByName(p.res.HostVeth)
	if err := n.node.NL.RouteDel(&netlink.Route{LinkIndex: host.Attrs().Index, Dst: host32(p.cfg.Address), Table: mainTable, Scope: netlink.SCOPE_LINK}); err != nil {
		t.Fatal(err)
	}
	if err := n.node.NL.RuleDel(fromPodRule(p.cfg.Address, 2)); err != nil {
		t.Fatal(err)
	}
	eth0, _ := p.ns.NL.LinkByName("eth0")
	if err := p.ns.NL.NeighDel(&netlink.Neigh{LinkIndex: eth0.Attrs().Index, IP: PodGateway.AsSlice(), Family: unix.AF_INET}); err != nil {
		t.Fatal(err)
	}
	if err := n.node.NL.NeighDel(&netlink.Neigh{LinkIndex: host.Attrs().Index, IP: p.cfg.Address.AsSlice(), Family: unix.AF_INET}); err != nil {
		t.Fatal(err)
	}

	err := n.net.CheckPod(p.cfg)
	var ce *CheckError
	if !errors.As(err, &ce) {
		t.Fatalf("CheckPod after removals: %v, want a *CheckError", err)
	}
	for _, want := range []string{
		"host route 10.0.1.20/32 dev " + p.res.HostVeth,
		"rule 1536: from 10.0.1.20/32 lookup 2",
		"pod neighbour 169.254.1.1",
		"host neighbour 10.0.1.20 lladdr " + p.res.PodMAC,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CheckPod error %q does not name %q", err, want)
		}
	}
	if len(ce.Missing) != 4 {
		t.Errorf("CheckPod found %d missing pieces %q, want exactly the 4 removed", len(ce.Missing), ce.Missing)
	}

	if _, err := n.net.SetupPod(p.cfg); err != nil {
		t.Fatalf("SetupPod to restore: %v", err)
	}
	if err := n.net.CheckPod(p.cfg); err != nil {
		t.Errorf("CheckPod after restore: %v", err)
	}
	if err := ping(p.ns, nodeIP); err != nil {
		t.Errorf("restored pod: %v", err)
	}

	// A missing namespace is named too.
	deleteNS(t, p.ns)
	if err := n.net.CheckPod(p.cfg); err == nil || !strings.Contains(err.Error(), "pod netns "+p.cfg.NetNS) {
		t.Errorf("CheckPod with the netns gone: %v, want it to name the netns", err)
	}
}

// TestTeardownPodRemovesExactlyWhatSetupAdded compares the whole node
// namespace before SetupPod and after TeardownPod, for a pod on each ENI,
// and shows a second teardown and a teardown with the netns gone succeed.
func TestTeardownPodRemovesExactlyWhatSetupAdded(t *testing.T) {
	n := newTestNode(t)
	n.setupENIs()
	keep := n.addPod("keep", "10.0.0.30", 0)
	before := snapshot(t, n.node)

	a := n.addPod("pa", "10.0.0.20", 0)
	c := n.addPod("pc", "10.0.1.20", 1)
	// A DEL that lost the address still removes the pod's rules.
	if err := n.net.TeardownPod(PodConfig{Attachment: a.cfg.Attachment}); err != nil {
		t.Fatalf("TeardownPod(a) without its address: %v", err)
	}
	if _, err := a.ns.NL.LinkByName("eth0"); err == nil {
		t.Errorf("pod a still has eth0 after teardown")
	}
	// c's namespace disappears first, as when the runtime removed it.
	deleteNS(t, c.ns)
	waitLinkGone(t, n.node, c.res.HostVeth)
	if err := n.net.TeardownPod(c.cfg); err != nil {
		t.Fatalf("TeardownPod(c) with its netns gone: %v", err)
	}
	if after := snapshot(t, n.node); !slices.Equal(before, after) {
		t.Errorf("node netns after teardown differs from before setup:\nbefore %q\nafter  %q", before, after)
	}
	for _, p := range []*testPod{a, c} {
		if err := n.net.TeardownPod(p.cfg); err != nil {
			t.Errorf("second TeardownPod(%v): %v", p.cfg.Attachment, err)
		}
	}
	if err := n.net.CheckPod(keep.cfg); err != nil {
		t.Errorf("untouched pod after others' teardown: %v", err)
	}
	if err := ping(keep.ns, nodeIP); err != nil {
		t.Errorf("untouched pod: %v", err)
	}
}

// TestLateTeardownOfOldSandboxSparesNewOwner: an old sandbox vanished
// without a DEL, its address went to a new sandbox, and the old DEL arrives
// late. The new pod must keep its rules and route.
func TestLateTeardownOfOldSandboxSparesNewOwner(t *testing.T) {
	n := newTestNode(t)
	n.setupENIs()
	old := n.addPod("old", "10.0.1.20", 1)
	deleteNS(t, old.ns) // the veth pair goes with it; the rules stay
	waitLinkGone(t, n.node, old.res.HostVeth)

	nsNew, cfgNew := n.podConfig("new", "10.0.1.20", 1)
	if _, err := n.net.SetupPod(cfgNew); err != nil {
		t.Fatalf("SetupPod(new): %v", err)
	}
	if err := n.net.TeardownPod(old.cfg); err != nil {
		t.Fatalf("late TeardownPod(old): %v", err)
	}
	if err := n.net.CheckPod(cfgNew); err != nil {
		t.Errorf("new pod after the old sandbox's DEL: %v", err)
	}
	if err := ping(nsNew, nodeIP); err != nil {
		t.Errorf("new pod after the old sandbox's DEL: %v", err)
	}
}

// TestSetupPodRefusesAddressOfAnotherPod: wiring a second attachment with an
// address already routed to a live pod fails and leaves that pod alone.
func TestSetupPodRefusesAddressOfAnotherPod(t *testing.T) {
	n := newTestNode(t)
	n.setupENIs()
	a := n.addPod("pa", "10.0.0.20", 0)
	_, cfg := n.podConfig("thief", "10.0.0.20", 0)
	if _, err := n.net.SetupPod(cfg); !errors.Is(err, ErrAddressInUse) {
		t.Fatalf("SetupPod with a taken address: %v, want ErrAddressInUse", err)
	}
	if _, err := n.node.NL.LinkByName(HostVethName(cfg.Attachment)); err == nil {
		t.Errorf("refused SetupPod left its veth behind")
	}
	if err := n.net.CheckPod(a.cfg); err != nil {
		t.Errorf("owner after refused SetupPod: %v", err)
	}
}

// TestRouteOwnerBehindAnotherRule: the owner of an address is found by the
// kernel's lookup when it ends in the main table, and by listing the main
// table when a rule ahead of main sends the lookup elsewhere.
func TestRouteOwnerBehindAnotherRule(t *testing.T) {
	n := newTestNode(t)
	n.setupENIs()
	a := n.addPod("pa", "10.0.0.20", 0)
	free := netip.MustParseAddr("10.0.0.99")
	check := func(when string, byLookup bool) {
		t.Helper()
		if _, ok := n.net.lookupOwner(a.cfg.Address); ok != byLookup {
			t.Errorf("%s: answered by the lookup: %v, want %v", when, ok, byLookup)
		}
		if owner, err := n.net.routeOwner(a.cfg.Address); err != nil || owner != a.res.HostVeth {
			t.Errorf("%s: owner of %s: %q, %v; want %s", when, a.cfg.Address, owner, err, a.res.HostVeth)
		}
		if owner, err := n.net.routeOwner(free); err != nil || owner != "" {
			t.Errorf("%s: owner of %s: %q, %v; want none", when, free, owner, err)
		}
	}
	check("lookup ending in main", true)

	host, err := n.node.NL.LinkByName(a.res.HostVeth)
	if err != nil {
		t.Fatal(err)
	}
	mustRoute(t, n.node.NL, &netlink.Route{LinkIndex: host.Attrs().Index, Table: 777, Scope: netlink.SCOPE_LINK,
		Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}})
	rule := netlink.NewRule()
	rule.Family, rule.Priority, rule.Table = unix.AF_INET, 100, 777
	if err := n.node.NL.RuleAdd(rule); err != nil {
		t.Fatal(err)
	}
	check("lookup ending in another table", false)
	_, cfg := n.podConfig("thief", "10.0.0.20", 0)
	if _, err := n.net.SetupPod(cfg); !errors.Is(err, ErrAddressInUse) {
		t.Fatalf("SetupPod with a taken address behind another rule: %v, want ErrAddressInUse", err)
	}
}

// TestSetupPodReplacesUnpairedVeth: a host veth with the attachment's name
// whose peer is not the pod's interface (an interrupted earlier attempt) is
// replaced, and a pod interface that is not ours is never taken over.
func TestSetupPodReplacesUnpairedVeth(t *testing.T) {
	n := newTestNode(t)
	n.setupENIs()
	ns, cfg := n.podConfig("pa", "10.0.0.20", 0)
	spare := newNS(t, "spare")
	veth(t, n.node, HostVethName(cfg.Attachment), "", spare, "eth0")
	if _, err := n.net.SetupPod(cfg); err != nil {
		t.Fatalf("SetupPod over an unpaired veth: %v", err)
	}
	if err := n.net.CheckPod(cfg); err != nil {
		t.Errorf("CheckPod: %v", err)
	}
	if _, err := spare.NL.LinkByName("eth0"); err == nil {
		t.Errorf("the unpaired veth's far end survived")
	}
	if err := ping(ns, nodeIP); err != nil {
		t.Errorf("pod over a replaced veth: %v", err)
	}

	// The pod namespace already has an eth0 that is not ours: refused,
	// and nothing of the refused veth is left.
	other, cfg2 := n.podConfig("pb", "10.0.0.21", 0)
	veth(t, other, "eth0", "", spare, "x0")
	if _, err := n.net.SetupPod(cfg2); !errors.Is(err, ErrIfNameTaken) {
		t.Errorf("SetupPod into a namespace with a foreign eth0: %v, want ErrIfNameTaken", err)
	}
	if _, err := n.node.NL.LinkByName(HostVethName(cfg2.Attachment)); err == nil {
		t.Errorf("refused SetupPod left its host veth behind")
	}
	if eth0, err := other.NL.LinkByName("eth0"); err != nil || eth0.Type() != "veth" {
		t.Errorf("the foreign eth0 is gone or changed: %v", err)
	}
}

// TestSetupPodWithNewAddressDropsTheOld: the same attachment set up again
// with another address (and ENI) ends with only the new one's pieces.
func TestSetupPodWithNewAddressDropsTheOld(t *testing.T) {
	n := newTestNode(t)
	n.setupENIs()
	p := n.addPod("pc", "10.0.1.20", 1)
	moved := p.cfg
	moved.Address = netip.MustParseAddr("10.0.0.40")
	moved.DeviceIndex = 0
	if _, err := n.net.SetupPod(moved); err != nil {
		t.Fatalf("SetupPod with a new address: %v", err)
	}
	if err := n.net.CheckPod(moved); err != nil {
		t.Errorf("CheckPod(new address): %v", err)
	}
	if owner, _ := n.net.routeOwner(p.cfg.Address); owner != "" {
		t.Errorf("old address still routed via %s", owner)
	}
	rules, _ := n.node.NL.RuleList(unix.AF_INET)
	for _, r := range rules {
		if ipNetString(r.Src) == "10.0.1.20/32" || ipNetString(r.Dst) == "10.0.1.20/32" {
			t.Errorf("rule for the old address survived: %v", r)
		}
	}
	eth0, _ := p.ns.NL.LinkByName("eth0")
	addrs, _ := p.ns.NL.AddrList(eth0, unix.AF_INET)
	if len(addrs) != 1 || addrs[0].IP.String() != "10.0.0.40" {
		t.Errorf("pod addresses %v, want only 10.0.0.40", addrs)
	}
}

// TestConcurrentSetupAndTeardown wires and unwires pods in parallel, as a
// burst of ADDs and DELs does, and expects the node exactly as before.
func TestConcurrentSetupAndTeardown(t *testing.T) {
	n := newTestNode(t)
	n.setupENIs()
	before := snapshot(t, n.node)
	var cfgs []PodConfig
	for i := range 12 {
		_, cfg := n.podConfig(fmt.Sprintf("p%d", i), fmt.Sprintf("10.0.%d.%d", i%2, 50+i), i%2)
		cfgs = append(cfgs, cfg)
	}
	parallel := func(f func(PodConfig) error) {
		var wg sync.WaitGroup
		for _, c := range cfgs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := f(c); err != nil {
					t.Errorf("%v: %v", c.Attachment, err)
				}
			}()
		}
		wg.Wait()
	}
	parallel(func(c PodConfig) error { _, err := n.net.SetupPod(c); return err })
	parallel(n.net.CheckPod)
	parallel(n.net.TeardownPod)
	if after := snapshot(t, n.node); !slices.Equal(before, after) {
		t.Errorf("node netns after parallel setup and teardown differs:\nbefore %q\nafter  %q", before, after)
	}
}

// fromRules lists the node's source rules of addr, as "table N".
func fromRules(t *testing.T, n *testNode, addr string) []string {
	t.Helper()
	rules, err := n.node.NL.RuleList(unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rules {
		if ipNetString(r.Src) == addr+"/32" {
			out = append(out, fmt.Sprintf("table %d prio %d", r.Table, r.Priority))
		}
	}
	return out
}

// TestFreshVethReplacesStaleSourceRules: source rules an earlier owner of
// the address left behind (its namespace gone without a teardown, and one
// into another ENI's table) do not survive a new pod wired with that
// address on a new veth: on the primary ENI it has none, on a secondary
// exactly the one into its ENI's table.
func TestFreshVethReplacesStaleSourceRules(t *testing.T) {
	n := newTestNode(t)
	n.setupENIs()
	const addr = "10.0.1.20"
	old := n.addPod("old", addr, 1)
	deleteNS(t, old.ns) // the veth goes, the rules stay
	waitLinkGone(t, n.node, old.res.HostVeth)
	stale := fromPodRule(netip.MustParseAddr(addr), RouteTable(2))
	if err := n.node.NL.RuleAdd(stale); err != nil {
		t.Fatal(err)
	}
	if got := fromRules(t, n, addr); len(got) != 2 {
		t.Fatalf("before: source rules %v, want the two stale ones", got)
	}

	primary := n.addPod("primary", addr, 0)
	if got := fromRules(t, n, addr); len(got) != 0 {
		t.Errorf("pod on the primary ENI: source rules %v, want none", got)
	}
	if err := n.net.CheckPod(primary.cfg); err != nil {
		t.Errorf("CheckPod(primary): %v", err)
	}
	if err := n.net.TeardownPod(primary.cfg); err != nil {
		t.Fatal(err)
	}

	if err := n.node.NL.RuleAdd(stale); err != nil {
		t.Fatal(err)
	}
	secondary := n.addPod("secondary", addr, 1)
	want := fmt.Sprintf("table %d prio %d", RouteTable(1), PriorityFromPod)
	if got := fromRules(t, n, addr); len(got) != 1 || got[0] != want {
		t.Errorf("pod on the secondary ENI: source rules %v, want [%s]", got, want)
	}
	if err := n.net.CheckPod(secondary.cfg); err != nil {
		t.Errorf("CheckPod(secondary): %v", err)
	}
	if err := ping(secondary.ns, nodeIP); err != nil {
		t.Errorf("pod on the secondary ENI: %v", err)
	}
}
