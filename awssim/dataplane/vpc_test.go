package dataplane

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/vishvananda/netlink"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/awssim/world"
)

const (
	nodeA   = "i-0aaaaaaaaaaaaaaaa"
	nodeB   = "i-0bbbbbbbbbbbbbbbb"
	subnetA = "subnet-0aaaaaaaaaaaaaaaa"
	subnetB = "subnet-0bbbbbbbbbbbbbbbb"
)

var (
	cidrA = netip.MustParsePrefix("10.0.0.0/24")
	cidrB = netip.MustParsePrefix("10.0.1.0/24")
)

// vpcScenario: one VPC, two subnets (one AZ, so any ENI attaches to any
// node), node A in subnet a and node B in subnet b.
func vpcScenario() scenario.Scenario {
	return scenario.Scenario{
		VPCs: []scenario.VPC{{
			ID: "vpc-0123456789abcdef0", CIDRs: []string{"10.0.0.0/16"},
			Subnets: []scenario.Subnet{
				{ID: subnetA, Name: "a", CIDR: cidrA.String(), AZ: "us-east-1a"},
				{ID: subnetB, Name: "b", CIDR: cidrB.String(), AZ: "us-east-1a"},
			},
		}},
		Instances: []scenario.Instance{
			{ID: nodeA, Subnet: "a", Type: "c5.xlarge"},
			{ID: nodeB, Subnet: "b", Type: "c5.xlarge"},
		},
		Throttle: scenario.Throttle{Disabled: true},
	}
}

type env struct {
	plane *Plane
	sim   *awssim.Sim
	ec2   *ec2.Client
	ctx   context.Context
}

// startEnv runs awssim with the plane's hooks registered before the
// scenario's instances launch, then binds the plane to the world.
func startEnv(t *testing.T) *env {
	t.Helper()
	return startEnvWith(t, vpcScenario())
}

// startEnvWith is startEnv on another scenario.
func startEnvWith(t *testing.T, sc scenario.Scenario) *env {
	t.Helper()
	p := newPlane(t)
	sim, err := awssim.Start(context.Background(), awssim.Config{
		Scenario: sc, Hooks: p.Hooks(), TimeScale: 1000, Seed: 7, AdminAddr: "off",
	})
	if err != nil {
		t.Fatalf("start awssim: %v", err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	must(t, p.Bind(sim.World()))
	syncPlane(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return &env{plane: p, sim: sim, ec2: ec2.NewFromConfig(awssim.SDKConfig(sim.EC2Endpoint())), ctx: ctx}
}

func (e *env) instance(t *testing.T, id string) world.Instance {
	t.Helper()
	inst, ok := e.sim.World().Instance(id)
	if !ok {
		t.Fatalf("no instance %s", id)
	}
	return inst
}

// createAttach creates an ENI through the SDK and attaches it.
func (e *env) createAttach(t *testing.T, in *ec2.CreateNetworkInterfaceInput, instanceID string, device int32) (*types.NetworkInterface, string) {
	t.Helper()
	out, err := e.ec2.CreateNetworkInterface(e.ctx, in)
	if err != nil {
		t.Fatalf("create eni: %v", err)
	}
	att, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: out.NetworkInterface.NetworkInterfaceId, InstanceId: aws.String(instanceID), DeviceIndex: aws.Int32(device),
	})
	if err != nil {
		t.Fatalf("attach eni: %v", err)
	}
	return out.NetworkInterface, aws.ToString(att.AttachmentId)
}

func secondaries(n *types.NetworkInterface) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.PrivateIpAddresses {
		if !aws.ToBool(a.Primary) {
			out = append(out, netip.MustParseAddr(aws.ToString(a.PrivateIpAddress)))
		}
	}
	return out
}

func TestVPCDataPlane(t *testing.T) {
	requireRoot(t)
	e := startEnv(t)
	p := e.plane
	instA, instB := e.instance(t, nodeA), e.instance(t, nodeB)
	pa, pb := netip.MustParseAddr(instA.PrivateIP), netip.MustParseAddr(instB.PrivateIP)
	nsA, nsB := p.NodeNetns(nodeA), p.NodeNetns(nodeB)
	if nsA == "" || nsB == "" {
		t.Fatalf("node namespaces not created: A=%q B=%q", nsA, nsB)
	}
	nlA, nlB, vpc := nlAt(t, nsA), nlAt(t, nsB), nlAt(t, p.VPCNetns())

	t.Run("primary ENI is configured as DHCP would", func(t *testing.T) {
		l := linkByMAC(t, nlA, instA.MAC)
		if l == nil {
			t.Fatalf("node A has no link with its primary MAC %s", instA.MAC)
		}
		if l.Attrs().Name != "eth0" || l.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("primary link %s up=%v, want eth0 up", l.Attrs().Name, l.Attrs().Flags&net.FlagUp != 0)
		}
		if got, want := v4Addrs(t, nlA, l), []string{pa.String() + "/24"}; !slices.Equal(got, want) {
			t.Errorf("primary link addresses %v, want %v", got, want)
		}
		routes, err := nlA.RouteList(l, netlink.FAMILY_V4)
		must(t, err)
		var gw string
		for _, r := range routes {
			if r.Dst == nil || dstPrefix(r.Dst).Bits() == 0 {
				gw = r.Gw.String()
			}
		}
		if gw != "10.0.0.1" {
			t.Errorf("node A default route via %q, want 10.0.0.1", gw)
		}
	})

	// ENI A1: subnet a, two secondaries, on node A at device 1.
	a1, _ := e.createAttach(t, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnetA), SecondaryPrivateIpAddressCount: aws.Int32(2)}, nodeA, 1)
	a1Primary := netip.MustParseAddr(aws.ToString(a1.PrivateIpAddress))
	sa := secondaries(a1)
	// ENI B1: subnet a (node A's), one /28 prefix, on node B at device 1.
	b1, b1Att := e.createAttach(t, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnetA), Ipv4PrefixCount: aws.Int32(1)}, nodeB, 1)
	b1Primary := netip.MustParseAddr(aws.ToString(b1.PrivateIpAddress))
	b1Prefix := netip.MustParsePrefix(aws.ToString(b1.Ipv4Prefixes[0].Ipv4Prefix))
	prefixAddr := b1Prefix.Addr().Next()
	// One secondary on node B's primary ENI.
	asg, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(instB.NetworkInterfaces[0].ID), SecondaryPrivateIpAddressCount: aws.Int32(1),
	})
	must(t, err)
	sb := netip.MustParseAddr(aws.ToString(asg.AssignedPrivateIpAddresses[0].PrivateIpAddress))
	syncPlane(t, p)
	t.Logf("A=%s A1=%s %v  B=%s +%s  B1=%s %s", pa, a1Primary, sa, pb, sb, b1Primary, b1Prefix)

	t.Run("secondary ENI link is down and bare", func(t *testing.T) {
		l := linkByMAC(t, nlA, aws.ToString(a1.MacAddress))
		if l == nil {
			t.Fatalf("node A has no link with A1's MAC")
		}
		if l.Attrs().Flags&net.FlagUp != 0 || len(v4Addrs(t, nlA, l)) != 0 {
			t.Errorf("secondary link %s: up=%v addrs=%v, want down and bare", l.Attrs().Name, l.Attrs().Flags&net.FlagUp != 0, v4Addrs(t, nlA, l))
		}
	})

	t.Run("VPC routes each address to the ENI that owns it", func(t *testing.T) {
		for dst, eniID := range map[netip.Prefix]string{
			netip.PrefixFrom(pa, 32): instA.NetworkInterfaces[0].ID, netip.PrefixFrom(sb, 32): instB.NetworkInterfaces[0].ID,
			netip.PrefixFrom(sa[0], 32): aws.ToString(a1.NetworkInterfaceId), netip.PrefixFrom(sa[1], 32): aws.ToString(a1.NetworkInterfaceId),
			b1Prefix: aws.ToString(b1.NetworkInterfaceId), netip.PrefixFrom(b1Primary, 32): aws.ToString(b1.NetworkInterfaceId),
		} {
			r, ok := vpcRoute(t, vpc, dst)
			if !ok {
				t.Errorf("no VPC route to %s", dst)
				continue
			}
			l, err := vpc.LinkByIndex(r.LinkIndex)
			must(t, err)
			if l.Attrs().Alias != eniID {
				t.Errorf("route to %s leaves by %s (%s), want the link of %s", dst, l.Attrs().Name, l.Attrs().Alias, eniID)
			}
		}
	})

	// What the agent would do on each node.
	setupSecondaryENI(t, nlA, aws.ToString(a1.MacAddress), a1Primary, cidrA, 2, sa[0])
	setupSecondaryENI(t, nlB, aws.ToString(b1.MacAddress), b1Primary, cidrA, 2, prefixAddr)
	addAddr(t, nlB, linkByMAC(t, nlB, instB.MAC), sb)

	t.Run("node primaries ping the gateway and each other", func(t *testing.T) {
		must(t, ping(t, nsA, pa, gateway(cidrA)))
		must(t, ping(t, nsA, pa, pb))
		must(t, ping(t, nsB, pb, pa))
	})

	t.Run("secondary address reaches secondary address", func(t *testing.T) {
		tcpServe(t, nsB, sb, 7001)
		must(t, tcpRoundTrip(t, nsA, sa[0], sb, 7001))
	})

	t.Run("prefix address is reached in the same subnet", func(t *testing.T) {
		// Node A ARPs for it directly (same subnet): the VPC answers by proxy.
		tcpServe(t, nsB, prefixAddr, 7002)
		must(t, tcpRoundTrip(t, nsA, pa, prefixAddr, 7002))
	})

	t.Run("spoofed source is dropped", func(t *testing.T) {
		// sa[1] belongs to A1, not to A's primary ENI it leaves by.
		addAddr(t, nlA, linkByMAC(t, nlA, instA.MAC), sa[1])
		sink := udpListen(t, nsB, pb, 7003)
		cmt := commentSrcPrefix + instA.NetworkInterfaces[0].ID
		before := dropCount(t, p, nftChainSrc, cmt)
		udpSend(t, nsA, sa[1], pb, 7003)
		waitDrop(t, p, nftChainSrc, cmt, before)
		udpSend(t, nsA, pa, pb, 7003)
		sink.waitFrom(t, pa)
		if n := sink.count(sa[1]); n != 0 {
			t.Errorf("node B received %d datagrams from spoofed %s", n, sa[1])
		}
	})

	t.Run("outside is reachable from node primaries only", func(t *testing.T) {
		out := p.OutsideAddr()
		tcpServe(t, p.OutsideNetns(), out, 7004)
		must(t, tcpRoundTrip(t, nsA, pa, out, 7004))
		must(t, ping(t, nsB, pb, out))
		sink := udpListen(t, p.OutsideNetns(), out, 7005)
		before := dropCount(t, p, nftChainOutside, commentOutsideEgress)
		udpSend(t, nsA, sa[0], out, 7005) // legitimate on A1, but not a node primary
		waitDrop(t, p, nftChainOutside, commentOutsideEgress, before)
		udpSend(t, nsA, pa, out, 7005)
		sink.waitFrom(t, pa)
		if n := sink.count(sa[0]); n != 0 {
			t.Errorf("outside received %d datagrams from non-primary %s", n, sa[0])
		}
	})

	t.Run("unassign removes the route and the source", func(t *testing.T) {
		_, err := e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{
			NetworkInterfaceId: aws.String(instB.NetworkInterfaces[0].ID), PrivateIpAddresses: []string{sb.String()},
		})
		must(t, err)
		syncPlane(t, p)
		if r, ok := vpcRoute(t, vpc, netip.PrefixFrom(sb, 32)); ok {
			t.Fatalf("VPC still routes %s: %v", sb, r)
		}
		if err := tcpRoundTrip(t, nsA, pa, sb, 7001); err == nil {
			t.Errorf("%s still reachable after unassign", sb)
		}
	})

	t.Run("detach removes the link", func(t *testing.T) {
		_, err := e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(b1Att)})
		must(t, err)
		waitStatus(t, e, aws.ToString(b1.NetworkInterfaceId), "available")
		syncPlane(t, p)
		if l := linkByMAC(t, nlB, aws.ToString(b1.MacAddress)); l != nil {
			t.Errorf("node B still has %s with B1's MAC", l.Attrs().Name)
		}
		if _, ok := vpcRoute(t, vpc, b1Prefix); ok {
			t.Errorf("VPC still routes B1's prefix %s", b1Prefix)
		}
		if _, err := vpc.LinkByName(vpcLinkName(aws.ToString(b1.NetworkInterfaceId))); err == nil {
			t.Errorf("VPC end of B1 still exists")
		}
	})

	t.Run("terminated instance loses its namespace", func(t *testing.T) {
		must(t, e.sim.RemoveInstance(nodeA))
		syncPlane(t, p)
		if got := p.NodeNetns(nodeA); got != "" {
			t.Errorf("NodeNetns(A) = %q after termination", got)
		}
		if _, err := os.Stat(nsA); !os.IsNotExist(err) {
			t.Errorf("%s still exists: %v", nsA, err)
		}
		// A1 was not delete-on-termination: it is available, its link gone.
		if _, err := vpc.LinkByName(vpcLinkName(aws.ToString(a1.NetworkInterfaceId))); err == nil {
			t.Errorf("VPC end of A1 still exists")
		}
	})

	must(t, p.Close())
	must(t, p.Close()) // idempotent
	if left := namespacesWithPrefix(t, p.Prefix()); len(left) != 0 {
		t.Errorf("namespaces left after Close: %v", left)
	}
	if ip, err := exec.LookPath("ip"); err == nil {
		out, err := exec.Command(ip, "netns", "list").CombinedOutput()
		must(t, err)
		if strings.Contains(string(out), p.Prefix()+"-") {
			t.Errorf("ip netns list still shows %s:\n%s", p.Prefix(), out)
		}
	}
}

func waitStatus(t *testing.T, e *env, eniID, status string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, ok := e.sim.World().NetworkInterface(eniID)
		if ok && n.Status == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("eni %s status %q, want %q", eniID, n.Status, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
