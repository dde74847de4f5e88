package harness

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/allotnet/allot/agent/hostnet"
)

// TestVerifyWired: a pod wired by the agent's own netlink layer passes
// VerifyWired and answers ping; each piece removed afterwards is reported
// by name; after teardown VerifyGone is clean and HostRecords agree with
// the records of what is left.
func TestVerifyWired(t *testing.T) {
	c := StartCloud(t, CloudConfig{})
	l, err := hostnet.New(hostnet.Config{NodeNetNS: c.Node.NS.Path, LinkWait: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	inst := c.Instance(t)
	if err := l.SetupENI(hostnet.ENIConfig{MAC: inst.MAC, PrimaryIP: netip.MustParseAddr(inst.PrivateIP), Subnet: SubnetCIDR}); err != nil {
		t.Fatal(err)
	}
	pods := []*Pod{NewPod(t, "e2e", "a"), NewPod(t, "e2e", "b"), NewPod(t, "e2e", "unassigned")}
	addrs := []netip.Addr{netip.MustParseAddr("10.0.9.1"), netip.MustParseAddr("10.0.9.2"), netip.MustParseAddr("10.0.9.3")}
	// EC2 assigns the first two to the primary ENI; the third is nobody's.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.EC2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(inst.NetworkInterfaces[0].ID), PrivateIpAddresses: []string{"10.0.9.1", "10.0.9.2"}}); err != nil {
		t.Fatal(err)
	}
	for i, p := range pods {
		cfg := hostnet.PodConfig{Attachment: hostnet.Attachment{Network: Network, ContainerID: p.RT.ContainerID, IfName: "eth0"},
			NetNS: p.NS.Path, Address: addrs[i]}
		if _, err := l.SetupPod(cfg); err != nil {
			t.Fatal(err)
		}
	}
	if err := Ping(pods[2].NS, SubnetGateway, 1); err == nil {
		t.Error("a pod with an address EC2 never assigned reached the VPC; the vpc namespace must drop it")
	}
	if err := l.TeardownPod(hostnet.PodConfig{Attachment: hostnet.Attachment{Network: Network, ContainerID: pods[2].RT.ContainerID, IfName: "eth0"},
		NetNS: pods[2].NS.Path, Address: addrs[2]}); err != nil {
		t.Fatal(err)
	}
	pods, addrs = pods[:2], addrs[:2]
	host, err := InspectHost(c.Node.NS)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pods {
		if bad := VerifyWired(host, Wired{Network: Network, Pod: p, Addr: addrs[i]}); len(bad) > 0 {
			t.Fatalf("pod %s wired by hostnet fails verification: %v", p, bad)
		}
		if err := Ping(c.Node.NS, addrs[i], 2); err != nil {
			t.Error(err)
		}
		if err := Ping(p.NS, SubnetGateway, 2); err != nil {
			t.Errorf("pod %s cannot reach the VPC: %v", p, err)
		}
	}
	// Claimed to be on a secondary ENI, it lacks the source rule.
	if bad := VerifyWired(host, Wired{Network: Network, Pod: pods[0], Addr: addrs[0], DeviceIndex: 2}); !mentions(bad, "from 10.0.9.1 lookup 3") {
		t.Errorf("a missing source rule is not reported: %v", bad)
	}
	// The wrong address.
	if bad := VerifyWired(host, Wired{Network: Network, Pod: pods[0], Addr: addrs[1]}); !mentions(bad, "pod addresses") {
		t.Errorf("a wrong address is not reported: %v", bad)
	}
	want := Records{Key(Network, pods[0]): addrs[0], Key(Network, pods[1]): addrs[1]}
	if d := Diff("host", HostRecords(host), "want", want); len(d) > 0 {
		t.Errorf("host records: %v", d)
	}

	// Break pod a piece by piece.
	p := pods[0]
	eth0, err := p.NS.NL.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.NS.NL.NeighDel(&netlink.Neigh{LinkIndex: eth0.Attrs().Index, Family: unix.AF_INET, IP: PodGateway.AsSlice()}); err != nil {
		t.Fatal(err)
	}
	hv, err := c.Node.NS.NL.LinkByName(HostVethName(Network, p))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Node.NS.NL.RouteDel(&netlink.Route{LinkIndex: hv.Attrs().Index, Table: unix.RT_TABLE_MAIN, Scope: netlink.SCOPE_LINK,
		Dst: &net.IPNet{IP: addrs[0].AsSlice(), Mask: net.CIDRMask(32, 32)}}); err != nil {
		t.Fatal(err)
	}
	rule := netlink.NewRule()
	rule.Family, rule.Priority, rule.Table = unix.AF_INET, PriorityToPod, unix.RT_TABLE_MAIN
	rule.Dst = &net.IPNet{IP: addrs[0].AsSlice(), Mask: net.CIDRMask(32, 32)}
	if err := c.Node.NS.NL.RuleDel(rule); err != nil {
		t.Fatal(err)
	}
	host, err = InspectHost(c.Node.NS)
	if err != nil {
		t.Fatal(err)
	}
	bad := VerifyWired(host, Wired{Network: Network, Pod: p, Addr: addrs[0]})
	for _, want := range []string{"neighbour 169.254.1.1 state", "host routes via", "rule 512 to 10.0.9.1"} {
		if !mentions(bad, want) {
			t.Errorf("broken pod: %q not reported in %v", want, bad)
		}
	}
	if d := Diff("host", HostRecords(host), "want", want); !mentions(d, "?"+HostVethName(Network, p)) {
		t.Errorf("a veth without its route is not reported as unknown: %v", d)
	}

	for i, p := range pods {
		cfg := hostnet.PodConfig{Attachment: hostnet.Attachment{Network: Network, ContainerID: p.RT.ContainerID, IfName: "eth0"},
			NetNS: p.NS.Path, Address: addrs[i]}
		if err := l.TeardownPod(cfg); err != nil {
			t.Fatal(err)
		}
	}
	host, err = InspectHost(c.Node.NS)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pods {
		if bad := VerifyGone(host, Network, p, addrs[i]); len(bad) > 0 {
			t.Errorf("after teardown of %s: %v", p, bad)
		}
	}
	if len(HostRecords(host)) != 0 {
		t.Errorf("host records after teardown: %v", HostRecords(host))
	}
}

func mentions(list []string, s string) bool {
	return slices.ContainsFunc(list, func(x string) bool { return strings.Contains(x, s) })
}

// TestRecordsDiff: Diff names each side's extra and differing entries;
// Duplicates finds an address held twice.
func TestRecordsDiff(t *testing.T) {
	a1, a2 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	x := Records{"n/a/eth0": a1, "n/b/eth0": a2}
	y := Records{"n/a/eth0": a2, "n/c/eth0": a1}
	got := Diff("x", x, "y", y)
	want := []string{
		"x has n/a/eth0 = 10.0.0.1, y has 10.0.0.2",
		"x has n/b/eth0 = 10.0.0.2, y has nothing",
		"y has n/c/eth0 = 10.0.0.1, x has nothing",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Diff:\n got %q\nwant %q", got, want)
	}
	if d := Diff("x", x, "x again", x); len(d) != 0 {
		t.Errorf("Diff of equal records: %v", d)
	}
	if d := (Records{"n/a/eth0": a1, "n/b/eth0": a1}).Duplicates(); len(d) != 1 || !strings.Contains(d[0], "10.0.0.1") {
		t.Errorf("Duplicates: %v", d)
	}
}
