package dataplane

import (
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/awssim/world"
)

// customNetworkingScenario is deploy/awssim/custom-networking.yaml, the
// file an operator runs awssim with, so what is tested here is what is
// shipped.
func customNetworkingScenario(t *testing.T) scenario.Scenario {
	t.Helper()
	sc, err := scenario.Load(filepath.Join("..", "..", "deploy", "awssim", "custom-networking.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sc.Throttle = scenario.Throttle{Disabled: true}
	return sc
}

// instancesIn returns the scenario's instances launched in a subnet, in
// launch order.
func instancesIn(t *testing.T, e *env, subnetName string) []world.Instance {
	t.Helper()
	id, ok := scenario.SubnetID(e.sim.World(), subnetName)
	if !ok {
		t.Fatalf("no subnet %s", subnetName)
	}
	var out []world.Instance
	for _, in := range e.sim.World().Instances() {
		if in.SubnetID == id {
			out = append(out, in)
		}
	}
	return out
}

// podENI creates an ENI in a pod subnet, attaches it at device 1 and sets
// it up on the node as the agent would, with the addresses it got standing
// in for pods. It returns those addresses (the first of each prefix).
func podENI(t *testing.T, e *env, inst world.Instance, subnetName string, in *ec2.CreateNetworkInterfaceInput) (eniID string, pods []netip.Addr) {
	t.Helper()
	subnetID, _ := scenario.SubnetID(e.sim.World(), subnetName)
	sn, _ := e.sim.World().Subnet(subnetID)
	in.SubnetId = aws.String(subnetID)
	n, _ := e.createAttach(t, in, inst.ID, 1)
	pods = secondaries(n)
	for _, p := range n.Ipv4Prefixes {
		pods = append(pods, netip.MustParsePrefix(aws.ToString(p.Ipv4Prefix)).Addr().Next())
	}
	syncPlane(t, e.plane)
	setupSecondaryENI(t, nlAt(t, e.plane.NodeNetns(inst.ID)), aws.ToString(n.MacAddress),
		netip.MustParseAddr(aws.ToString(n.PrivateIpAddress)), netip.MustParsePrefix(sn.CIDR), 2, pods...)
	return aws.ToString(n.NetworkInterfaceId), pods
}

// TestSecondaryCIDRRouting runs the custom-networking scenario: nodes in
// 10.0.0.0/16, ENIs for pods in two subnets per zone of the secondary CIDR
// 100.64.0.0/16. The one VPC router carries packets between pod subnets of
// one zone and of two zones, between pod addresses and node primaries in
// both directions, keeps EC2's source check for the new CIDR, and lets
// only node primaries out; IMDS tells the node both CIDRs, which is what
// keeps the agent from translating traffic to the secondary one.
func TestSecondaryCIDRRouting(t *testing.T) {
	requireRoot(t)
	e := startEnvWith(t, customNetworkingScenario(t))
	p := e.plane
	nodesA, nodesB := instancesIn(t, e, "nodes-a"), instancesIn(t, e, "nodes-b")
	if len(nodesA) != 2 || len(nodesB) != 1 {
		t.Fatalf("scenario has %d nodes in nodes-a and %d in nodes-b, want 2 and 1", len(nodesA), len(nodesB))
	}
	a1, a2, b := nodesA[0], nodesA[1], nodesB[0]
	nsA1, nsA2, nsB := p.NodeNetns(a1.ID), p.NodeNetns(a2.ID), p.NodeNetns(b.ID)
	primA1, primB := netip.MustParseAddr(a1.PrivateIP), netip.MustParseAddr(b.PrivateIP)
	nodeCIDR, podCIDR := netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("100.64.0.0/16")
	for _, in := range []world.Instance{a1, a2, b} {
		if !nodeCIDR.Contains(netip.MustParseAddr(in.PrivateIP)) {
			t.Fatalf("node %s has primary address %s, want one in %s", in.ID, in.PrivateIP, nodeCIDR)
		}
	}

	eniA1, podsA1 := podENI(t, e, a1, "pods-a1", &ec2.CreateNetworkInterfaceInput{SecondaryPrivateIpAddressCount: aws.Int32(2)})
	_, podsA2 := podENI(t, e, a2, "pods-a2", &ec2.CreateNetworkInterfaceInput{SecondaryPrivateIpAddressCount: aws.Int32(1)})
	_, podsB := podENI(t, e, b, "pods-b1", &ec2.CreateNetworkInterfaceInput{Ipv4PrefixCount: aws.Int32(1)})
	t.Logf("A1 %s pods %v  A2 %s pods %v  B %s pods %v", a1.PrivateIP, podsA1, a2.PrivateIP, podsA2, b.PrivateIP, podsB)
	for _, a := range slices.Concat(podsA1, podsA2, podsB) {
		if !podCIDR.Contains(a) {
			t.Fatalf("pod address %s is outside %s", a, podCIDR)
		}
	}

	t.Run("IMDS lists both VPC CIDRs", func(t *testing.T) {
		got := imdsGet(t, e, a1, "network/interfaces/macs/"+a1.MAC+"/vpc-ipv4-cidr-blocks")
		if want := "10.0.0.0/16\n100.64.0.0/16"; got != want {
			t.Errorf("vpc-ipv4-cidr-blocks %q, want %q", got, want)
		}
	})

	t.Run("pod subnets of one zone reach each other", func(t *testing.T) {
		must(t, ping(t, nsA1, podsA1[0], podsA2[0]))
		must(t, ping(t, nsA2, podsA2[0], podsA1[0]))
	})

	t.Run("pod subnets of two zones reach each other", func(t *testing.T) {
		tcpServe(t, nsB, podsB[0], 7101)
		must(t, tcpRoundTrip(t, nsA1, podsA1[0], podsB[0], 7101))
		must(t, ping(t, nsB, podsB[0], podsA2[0]))
	})

	t.Run("pod addresses and node primaries reach each other", func(t *testing.T) {
		tcpServe(t, nsA1, podsA1[1], 7102)
		must(t, tcpRoundTrip(t, nsB, primB, podsA1[1], 7102))
		tcpServe(t, nsB, primB, 7103)
		must(t, tcpRoundTrip(t, nsA1, podsA1[1], primB, 7103))
	})

	t.Run("a pod address leaving by a node-subnet ENI is dropped", func(t *testing.T) {
		// A second address of A1's pod ENI, sent from the primary ENI
		// with no rule steering it to its own ENI: what a node that
		// skipped the pod's source rule would do.
		spoof := podsA1[1]
		nl := nlAt(t, nsA1)
		must(t, nl.RuleDel(fromRule(spoof, 2)))
		addAddr(t, nl, linkByMAC(t, nl, a1.MAC), spoof)
		sink := udpListen(t, nsB, primB, 7104)
		cmt := commentSrcPrefix + a1.NetworkInterfaces[0].ID
		before := dropCount(t, p, nftChainSrc, cmt)
		udpSend(t, nsA1, spoof, primB, 7104)
		waitDrop(t, p, nftChainSrc, cmt, before)
		udpSend(t, nsA1, primA1, primB, 7104)
		sink.waitFrom(t, primA1)
		if n := sink.count(spoof); n != 0 {
			t.Errorf("node B received %d datagrams from %s sent by the wrong ENI (A1's pod ENI is %s)", n, spoof, eniA1)
		}
	})

	t.Run("only node primaries reach the outside", func(t *testing.T) {
		out := p.OutsideAddr()
		sink := udpListen(t, p.OutsideNetns(), out, 7105)
		before := dropCount(t, p, nftChainOutside, commentOutsideEgress)
		udpSend(t, nsB, podsB[0], out, 7105)
		waitDrop(t, p, nftChainOutside, commentOutsideEgress, before)
		udpSend(t, nsB, primB, out, 7105)
		sink.waitFrom(t, primB)
		if n := sink.count(podsB[0]); n != 0 {
			t.Errorf("outside received %d datagrams from pod address %s", n, podsB[0])
		}
	})
}

// imdsGet reads one meta-data path of the instance's IMDS.
func imdsGet(t *testing.T, e *env, in world.Instance, path string) string {
	t.Helper()
	base, err := e.sim.IMDSEndpoint(in.ID)
	must(t, err)
	resp, err := http.Get(strings.TrimSuffix(base, "/") + "/latest/meta-data/" + path)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("IMDS %s: %s %s", path, resp.Status, b)
	}
	return strings.TrimSpace(string(b))
}

// fromRule is the rule setupSecondaryENI adds for a pod address.
func fromRule(a netip.Addr, table int) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = unix.AF_INET
	r.Src = ipNet(netip.PrefixFrom(a, 32))
	r.Table = table
	r.Priority = 1536
	return r
}
