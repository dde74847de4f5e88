package hostnet

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// The simulated node: a "node" namespace whose two ENI links (veths with
// the ENIs' MACs) lead into a "vpc" namespace. The vpc namespace plays the
// VPC router: it answers for both subnet gateways, routes the node's primary
// address and each secondary-ENI pod address back to the right ENI, holds an
// outside address (203.0.113.1), and does strict reverse-path filtering, so
// a packet with a source it would not route back through the same link is
// dropped, as the VPC's source/destination check would drop it. Pods on the
// primary ENI are not routed back at all: they reach the outside only if
// SNAT rewrote them to the node's address.
const (
	macPrimary   = "02:a1:00:00:00:05"
	macSecondary = "02:a1:00:00:00:06"
)

var (
	nodeIP    = netip.MustParseAddr("10.0.0.10")
	eni1IP    = netip.MustParseAddr("10.0.1.10")
	outsideIP = netip.MustParseAddr("203.0.113.1")
	vpcCIDR   = netip.MustParsePrefix("10.0.0.0/16")
)

type testNode struct {
	t         *testing.T
	vpc, node *testNS
	net       *Linux
	primary   ENIConfig
	secondary ENIConfig
}

type testPod struct {
	ns  *testNS
	cfg PodConfig
	res PodResult
}

func newTestNode(t *testing.T) *testNode {
	t.Helper()
	requireNetNS(t)
	n := &testNode{t: t, vpc: newNS(t, "vpc"), node: newNS(t, "node")}
	_, vpc0 := veth(t, n.node, "ens5", macPrimary, n.vpc, "vpc0")
	_, vpc1 := veth(t, n.node, "ens6", macSecondary, n.vpc, "vpc1")
	lo, _ := n.vpc.NL.LinkByName("lo")
	mustAddr(t, n.vpc.NL, lo, "203.0.113.1/32")
	mustAddr(t, n.vpc.NL, vpc0, "10.0.0.1/32")
	mustAddr(t, n.vpc.NL, vpc1, "10.0.1.1/32")
	mustRoute(t, n.vpc.NL, &netlink.Route{LinkIndex: vpc0.Attrs().Index, Dst: host32(nodeIP), Scope: netlink.SCOPE_LINK})
	mustRoute(t, n.vpc.NL, &netlink.Route{LinkIndex: vpc1.Attrs().Index, Dst: host32(eni1IP), Scope: netlink.SCOPE_LINK})
	for _, k := range []string{"all", "vpc0", "vpc1"} {
		sysctlIn(t, n.vpc, "net/ipv4/conf/"+k+"/rp_filter", "1")
	}

	l, err := New(Config{NodeNetNS: n.node.Path, LinkWait: 300 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	n.net = l
	n.primary = ENIConfig{MAC: macPrimary, DeviceIndex: 0, PrimaryIP: nodeIP, Subnet: netip.MustParsePrefix("10.0.0.0/24")}
	n.secondary = ENIConfig{MAC: macSecondary, DeviceIndex: 1, PrimaryIP: eni1IP, Subnet: netip.MustParsePrefix("10.0.1.0/24")}
	return n
}

// setupENIs sets up both ENIs, twice to show it is idempotent, then adds
// the node's default route (the OS's job on a real node).
func (n *testNode) setupENIs() {
	n.t.Helper()
	for range 2 {
		for _, c := range []ENIConfig{n.primary, n.secondary} {
			if err := n.net.SetupENI(c); err != nil {
				n.t.Fatalf("SetupENI(%s): %v", c.MAC, err)
			}
		}
	}
	ens5, err := n.node.NL.LinkByName("ens5")
	if err != nil {
		n.t.Fatal(err)
	}
	mustRoute(n.t, n.node.NL, &netlink.Route{LinkIndex: ens5.Attrs().Index,
		Dst: prefixToIPNet(netip.MustParsePrefix("0.0.0.0/0")), Gw: netip.MustParseAddr("10.0.0.1").AsSlice()})
}

// podConfig describes a pod in a fresh namespace without wiring it.
func (n *testNode) podConfig(role, addr string, device int) (*testNS, PodConfig) {
	n.t.Helper()
	ns := newNS(n.t, role)
	return ns, PodConfig{
		Attachment:  Attachment{Network: "allot-test", ContainerID: "ctr-" + role + "-" + runID, IfName: "eth0"},
		NetNS:       ns.Path,
		Address:     netip.MustParseAddr(addr),
		DeviceIndex: device,
	}
}

// addPod creates a pod namespace and wires it. For a pod on the secondary
// ENI the vpc namespace learns to route its address to that ENI, as the VPC
// does for an assigned secondary address.
func (n *testNode) addPod(role, addr string, device int) *testPod {
	n.t.Helper()
	ns, cfg := n.podConfig(role, addr, device)
	res, err := n.net.SetupPod(cfg)
	if err != nil {
		n.t.Fatalf("SetupPod(%s): %v", role, err)
	}
	if device == 1 {
		vpc1, _ := n.vpc.NL.LinkByName("vpc1")
		mustRoute(n.t, n.vpc.NL, &netlink.Route{LinkIndex: vpc1.Attrs().Index, Dst: host32(cfg.Address),
			Gw: eni1IP.AsSlice()})
	}
	return &testPod{ns: ns, cfg: cfg, res: res}
}
