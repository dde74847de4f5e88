package hostnet

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// TestSNAT checks the nftables chain and routing rules as the kernel lists
// them, and that real packets from pods on both ENIs reach the outside
// address only through the translation (the vpc namespace cannot route
// back to a primary-ENI pod's own address).
func TestSNAT(t *testing.T) {
	n := newTestNode(t)
	n.setupENIs()
	a := n.addPod("pa", "10.0.0.20", 0)
	c := n.addPod("pc", "10.0.1.20", 1)

	if !pingFails(a.ns, outsideIP) {
		t.Fatalf("primary-ENI pod reached %s before SNAT; the test network proves nothing", outsideIP)
	}

	cfg := SNATConfig{
		PrimaryMAC:   macPrimary,
		PrimaryIP:    nodeIP,
		VPCCIDRs:     []netip.Prefix{vpcCIDR},
		ExcludeCIDRs: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")},
	}
	if err := n.net.SetupSNAT(cfg); err != nil {
		t.Fatalf("SetupSNAT: %v", err)
	}
	assertSNATRules(t, n, []string{
		`oifname != "ens5" return`,
		`ip saddr 10.0.0.10 return`,
		`ip daddr 10.0.0.0/16 return`,
		`ip daddr 192.168.0.0/16 return`,
		`counter snat to 10.0.0.10 fully-random`,
	})
	assertChain(t, n)
	assertSNATIPRules(t, n, []string{
		"1024 to 10.0.0.0/16 goto 1536",
		"1024 to 192.168.0.0/16 goto 1536",
		"1025 to 0.0.0.0/0 table 254",
	})

	if err := ping(a.ns, outsideIP); err != nil {
		t.Errorf("primary-ENI pod to the outside through SNAT: %v", err)
	}
	afterA := snatPackets(t, n)
	if afterA == 0 {
		t.Errorf("SNAT counter is 0 after the primary-ENI pod's ping")
	}
	if err := ping(c.ns, outsideIP); err != nil {
		t.Errorf("secondary-ENI pod to the outside through SNAT: %v", err)
	}
	afterC := snatPackets(t, n)
	if afterC <= afterA {
		t.Errorf("SNAT counter %d -> %d: the secondary-ENI pod's traffic did not leave by the primary interface", afterA, afterC)
	}
	if err := ping(c.ns, netip.MustParseAddr("10.0.1.1")); err != nil {
		t.Errorf("secondary-ENI pod to the VPC keeps its ENI: %v", err)
	}

	// Same config again: nothing is rebuilt (the counter survives).
	if err := n.net.SetupSNAT(cfg); err != nil {
		t.Fatalf("SetupSNAT again: %v", err)
	}
	if got := snatPackets(t, n); got != afterC {
		t.Errorf("SetupSNAT with the same config rebuilt the chain: counter %d -> %d", afterC, got)
	}

	// A changed exclusion list replaces the rule and its routing rule.
	cfg.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("172.16.0.0/12")}
	if err := n.net.SetupSNAT(cfg); err != nil {
		t.Fatalf("SetupSNAT with new exclusions: %v", err)
	}
	assertSNATRules(t, n, []string{
		`oifname != "ens5" return`,
		`ip saddr 10.0.0.10 return`,
		`ip daddr 10.0.0.0/16 return`,
		`ip daddr 172.16.0.0/12 return`,
		`counter snat to 10.0.0.10 fully-random`,
	})
	assertSNATIPRules(t, n, []string{
		"1024 to 10.0.0.0/16 goto 1536",
		"1024 to 172.16.0.0/12 goto 1536",
		"1025 to 0.0.0.0/0 table 254",
	})

	// External SNAT: everything goes; pods leave with their own address.
	if err := n.net.SetupSNAT(SNATConfig{External: true}); err != nil {
		t.Fatalf("SetupSNAT(External): %v", err)
	}
	if rules, err := n.net.SNATRules(); err != nil || rules != nil {
		t.Errorf("SNAT rules with external SNAT: %q (%v), want no table", rules, err)
	}
	assertSNATIPRules(t, n, nil)
	if !pingFails(a.ns, outsideIP) {
		t.Errorf("primary-ENI pod reached the outside with SNAT off")
	}
	if err := ping(c.ns, outsideIP); err != nil {
		t.Errorf("secondary-ENI pod to the outside through its own ENI (external NAT): %v", err)
	}
	if err := n.net.SetupSNAT(SNATConfig{External: true}); err != nil {
		t.Errorf("SetupSNAT(External) again: %v", err)
	}

	if err := n.net.SetupSNAT(cfg); err != nil {
		t.Fatalf("SetupSNAT back on: %v", err)
	}
	if err := ping(a.ns, outsideIP); err != nil {
		t.Errorf("primary-ENI pod with SNAT back on: %v", err)
	}
}

func assertSNATRules(t *testing.T, n *testNode, want []string) {
	t.Helper()
	got, err := n.net.SNATRules()
	if err != nil {
		t.Fatalf("SNATRules: %v", err)
	}
	if !slices.Equal(withoutCounters(got), want) {
		t.Errorf("nftables %s/%s:\n got %q\nwant %q", NFTTable, NFTChain, got, want)
	}
}

// assertChain checks the chain's hook from the kernel's own listing.
func assertChain(t *testing.T, n *testNode) {
	t.Helper()
	conn, err := nftables.New(nftables.WithNetNSFd(int(n.node.Handle())))
	if err != nil {
		t.Fatal(err)
	}
	chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, ch := range chains {
		if ch.Table.Name != NFTTable {
			continue
		}
		found = true
		if ch.Name != NFTChain || ch.Type != nftables.ChainTypeNAT || ch.Hooknum == nil ||
			*ch.Hooknum != *nftables.ChainHookPostrouting || ch.Priority == nil || *ch.Priority != 100 {
			t.Errorf("chain %s: type %v hook %v priority %v, want nat postrouting 100", ch.Name, ch.Type, ch.Hooknum, ch.Priority)
		}
	}
	if !found {
		t.Errorf("no chain in table %s", NFTTable)
	}
}

func assertSNATIPRules(t *testing.T, n *testNode, want []string) {
	t.Helper()
	rules, err := n.node.NL.RuleList(unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules {
		if r.Priority != PriorityVPCGoto && r.Priority != PriorityNonVPCMain {
			continue
		}
		s := strconv.Itoa(r.Priority) + " to " + ipNetString(r.Dst)
		if r.Goto > 0 {
			s += " goto " + strconv.Itoa(r.Goto)
		} else {
			s += " table " + strconv.Itoa(r.Table)
		}
		got = append(got, s)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("SNAT routing rules:\n got %q\nwant %q", got, want)
	}
}

// snatPackets reads the SNAT rule's packet counter.
func snatPackets(t *testing.T, n *testNode) int {
	t.Helper()
	rules, err := n.net.SNATRules()
	if err != nil || len(rules) == 0 {
		t.Fatalf("SNATRules: %q %v", rules, err)
	}
	f := strings.Fields(rules[len(rules)-1])
	if len(f) < 3 || f[1] != "packets" {
		t.Fatalf("last SNAT rule %q has no counter", rules[len(rules)-1])
	}
	v, err := strconv.Atoi(f[2])
	if err != nil {
		t.Fatal(err)
	}
	return v
}
