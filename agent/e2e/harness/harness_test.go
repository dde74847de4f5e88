package harness

import (
	"context"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"golang.org/x/sys/unix"
)

// TestNodeMirrorsENIs: the node namespace gets a link with each attached
// ENI's MAC (the primary one configured as the OS would), the vpc namespace
// routes each assigned address to its ENI's link, and a detach removes the
// link. Driven through the real SDK, as the broker drives awssim.
func TestNodeMirrorsENIs(t *testing.T) {
	RequireRoot(t)
	c := StartCloud(t, CloudConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inst := c.Instance(t)
	links, err := c.Node.ENILinks()
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != 1 || links[0].Attrs().HardwareAddr.String() != inst.MAC {
		t.Fatalf("node links %v, want only the primary ENI with MAC %s", links, inst.MAC)
	}
	addrs, err := c.Node.NS.NL.AddrList(links[0], unix.AF_INET)
	if err != nil || len(addrs) != 1 || addrs[0].IPNet.String() != inst.PrivateIP+"/20" {
		t.Fatalf("primary link addresses %v (%v), want %s/20", addrs, err, inst.PrivateIP)
	}

	created, err := c.EC2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(SubnetID), SecondaryPrivateIpAddressCount: aws.Int32(3)})
	if err != nil {
		t.Fatal(err)
	}
	eni := created.NetworkInterface
	att, err := c.EC2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: eni.NetworkInterfaceId, InstanceId: aws.String(InstanceID), DeviceIndex: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EC2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: eni.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Node.Err(); err != nil {
		t.Fatal(err)
	}
	link, err := c.Node.NS.NL.LinkByName(LinkName(1))
	if err != nil || link.Attrs().HardwareAddr.String() != aws.ToString(eni.MacAddress) {
		t.Fatalf("device 1 link %v (%v), want MAC %s", link, err, aws.ToString(eni.MacAddress))
	}
	now, _ := c.Sim.World().NetworkInterface(aws.ToString(eni.NetworkInterfaceId))
	want := append([]string{now.PrivateIP}, now.SecondaryIPs...)
	if len(want) != 6 {
		t.Fatalf("eni has %v, want 1 primary and 5 secondary addresses", want)
	}
	routes := vpcRoutes(t, c.Node, vpcLinkName(1))
	slices.Sort(want)
	if !slices.Equal(routes, want) {
		t.Errorf("vpc routes via %s: %v, want %v", vpcLinkName(1), routes, want)
	}
	for _, a := range now.SecondaryIPs {
		if id, dev, ok := c.OwnerOf(netip.MustParseAddr(a)); !ok || dev != 1 || id != now.ID {
			t.Errorf("OwnerOf(%s) = %s %d %v", a, id, dev, ok)
		}
	}
	if _, err := c.EC2.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: eni.NetworkInterfaceId, PrivateIpAddresses: now.SecondaryIPs[:1]}); err != nil {
		t.Fatal(err)
	}
	if routes := vpcRoutes(t, c.Node, vpcLinkName(1)); slices.Contains(routes, now.SecondaryIPs[0]) || len(routes) != 5 {
		t.Errorf("after unassigning %s the vpc routes %v", now.SecondaryIPs[0], routes)
	}

	if _, err := c.EC2.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: att.AttachmentId}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.Node.NS.NL.LinkByName(LinkName(1)); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("device 1 link still there 10 s after the detach")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Node.Err(); err != nil {
		t.Fatal(err)
	}
}

func vpcRoutes(t *testing.T, n *Node, linkName string) []string {
	t.Helper()
	l, err := n.VPC.NL.LinkByName(linkName)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := n.VPC.NL.RouteList(l, unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		if r.Dst != nil {
			out = append(out, toPrefix(r.Dst).Addr().String())
		}
	}
	slices.Sort(out)
	return out
}

// TestNetNSCleanup: a namespace is gone after Delete, and Delete twice is
// fine.
func TestNetNSCleanup(t *testing.T) {
	RequireRoot(t)
	ns, err := CreateNetNS("probe")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ns.Name, Prefix+"-") {
		t.Errorf("namespace %s lacks the run prefix %s", ns.Name, Prefix)
	}
	if _, err := os.Stat(ns.Path); err != nil {
		t.Fatal(err)
	}
	if err := ns.Delete(); err != nil {
		t.Fatal(err)
	}
	if err := ns.Delete(); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	if _, err := os.Stat(ns.Path); !os.IsNotExist(err) {
		t.Errorf("%s still exists: %v", ns.Path, err)
	}
}
