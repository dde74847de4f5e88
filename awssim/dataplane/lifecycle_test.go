package dataplane

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/internal/netnstest"
)

// checkConverged compares the kernel with the world: every attached ENI
// has its node link (by MAC, named by device index) and a VPC link whose
// routes and source set are exactly what it owns, and no VPC link is left
// for an ENI that is not attached.
func checkConverged(t *testing.T, p *Plane, w *world.World) {
	t.Helper()
	vpc := nlAt(t, p.VPCNetns())
	links, err := vpc.LinkList()
	must(t, err)
	byAlias := map[string]netlink.Link{}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Alias, "eni-") {
			byAlias[l.Attrs().Alias] = l
		}
	}
	conn, err := nftables.New(nftables.WithNetNSFd(int(p.vpc.Handle())))
	must(t, err)
	tab := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: nftTable}
	attached := 0
	for _, e := range w.AllNetworkInterfaces() {
		if e.Attachment == nil {
			continue
		}
		attached++
		want, err := desired(w, *e)
		must(t, err)
		l, ok := byAlias[e.ID]
		if !ok {
			t.Errorf("eni %s (attached to %s) has no VPC link", e.ID, e.Attachment.InstanceID)
			continue
		}
		delete(byAlias, e.ID)
		routes, err := vpc.RouteList(l, netlink.FAMILY_V4)
		must(t, err)
		var got []netip.Prefix
		for _, r := range routes {
			got = append(got, dstPrefix(r.Dst))
		}
		slices.SortFunc(got, comparePrefix)
		if !slices.Equal(got, want.sources) {
			t.Errorf("eni %s: VPC routes %v, want %v", e.ID, got, want.sources)
		}
		set, err := conn.GetSetByName(tab, "src-"+l.Attrs().Name)
		if err != nil {
			t.Errorf("eni %s: source set: %v", e.ID, err)
		} else {
			elems, err := conn.GetSetElements(set)
			must(t, err)
			if g, w := elementKeys(elems), elementKeys(intervalElements(want.sources)); !slices.Equal(g, w) {
				t.Errorf("eni %s: source set %v, want %v", e.ID, g, w)
			}
		}
		node := p.NodeNetns(e.Attachment.InstanceID)
		if node == "" {
			t.Errorf("eni %s: instance %s has no namespace", e.ID, e.Attachment.InstanceID)
			continue
		}
		nl := nlAt(t, node)
		nl2 := linkByMAC(t, nl, e.MAC)
		if nl2 == nil || nl2.Attrs().Name != nodeLinkName(e.Attachment.DeviceIndex) {
			t.Errorf("eni %s: node link %v, want %s with MAC %s", e.ID, nl2, nodeLinkName(e.Attachment.DeviceIndex), e.MAC)
		}
	}
	for alias, l := range byAlias {
		t.Errorf("VPC link %s is left for %s, which is not attached", l.Attrs().Name, alias)
	}
	t.Logf("%d attached ENIs converged", attached)
}

func elementKeys(es []nftables.SetElement) []string {
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("%v/%v", net.IP(e.Key), e.IntervalEnd))
	}
	slices.Sort(out)
	return out
}

// TestBindAfterStart registers the hooks after the world exists: Bind must
// bring up the nodes launched before, and later changes must follow —
// including an address moved between ENIs with AllowReassignment.
func TestBindAfterStart(t *testing.T) {
	requireRoot(t)
	sim, err := awssim.Start(context.Background(), awssim.Config{Scenario: vpcScenario(), TimeScale: 1000, Seed: 3, AdminAddr: "off"})
	must(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	p := newPlane(t)
	w := sim.World()
	t.Cleanup(w.AddHooks(p.Hooks()))
	must(t, p.Bind(w))
	syncPlane(t, p)
	checkConverged(t, p, w)
	if p.NodeNetns(nodeA) == "" || p.NodeNetns(nodeB) == "" {
		t.Fatalf("Bind did not bring up the scenario's nodes")
	}

	instA, _ := w.Instance(nodeA)
	instB, _ := w.Instance(nodeB)
	res, err := w.AssignPrivateIPAddresses(world.AssignInput{ENIID: instB.NetworkInterfaces[0].ID, Count: 1})
	must(t, err)
	addr := res.Addresses[0]
	// Move it to an ENI of the same subnet on node A.
	e, err := w.CreateNetworkInterface(world.CreateNetworkInterfaceInput{SubnetID: subnetB})
	must(t, err)
	_, err = w.AttachNetworkInterface(e.ID, instA.ID, 1)
	must(t, err)
	_, err = w.AssignPrivateIPAddresses(world.AssignInput{ENIID: e.ID, Addresses: []string{addr}, AllowReassignment: true})
	must(t, err)
	syncPlane(t, p)
	checkConverged(t, p, w)
	vpc := nlAt(t, p.VPCNetns())
	r, ok := vpcRoute(t, vpc, netip.MustParsePrefix(addr+"/32"))
	if !ok {
		t.Fatalf("no route to reassigned %s", addr)
	}
	l, err := vpc.LinkByIndex(r.LinkIndex)
	must(t, err)
	if l.Attrs().Alias != e.ID {
		t.Errorf("reassigned %s routes to %s, want %s", addr, l.Attrs().Alias, e.ID)
	}
}

// TestChurnConverges attaches, fills, drains and detaches ENIs on three
// nodes through the SDK and checks that the kernel ends up exactly where
// the world is.
func TestChurnConverges(t *testing.T) {
	requireRoot(t)
	e := startEnv(t)
	inst, err := e.sim.AddInstance(world.InstanceSpec{ID: "i-0cccccccccccccccc", Type: "c5.xlarge", SubnetID: subnetA})
	must(t, err)
	nodes := []string{nodeA, nodeB, inst.ID}
	start := time.Now()
	type att struct{ eni, att string }
	var atts []att
	for _, n := range nodes {
		for dev := int32(1); dev <= 3; dev++ {
			in := &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnetA), SecondaryPrivateIpAddressCount: aws.Int32(13)}
			if dev == 3 {
				in = &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnetB), Ipv4PrefixCount: aws.Int32(2)}
			}
			ni, id := e.createAttach(t, in, n, dev)
			atts = append(atts, att{aws.ToString(ni.NetworkInterfaceId), id})
			if dev == 1 {
				ips := secondaries(ni)
				_, err := e.ec2.UnassignPrivateIpAddresses(e.ctx, &ec2.UnassignPrivateIpAddressesInput{
					NetworkInterfaceId: ni.NetworkInterfaceId, PrivateIpAddresses: []string{ips[0].String(), ips[5].String()},
				})
				must(t, err)
			}
		}
	}
	syncPlane(t, e.plane)
	t.Logf("9 ENIs (108 addresses, 6 prefixes) on 3 nodes applied in %v", time.Since(start))
	checkConverged(t, e.plane, e.sim.World())

	// Detach device 2 everywhere; add addresses to device 1 meanwhile.
	for i, a := range atts {
		if i%3 == 1 {
			_, err := e.ec2.DetachNetworkInterface(e.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(a.att)})
			must(t, err)
		}
		if i%3 == 0 {
			_, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{
				NetworkInterfaceId: aws.String(a.eni), SecondaryPrivateIpAddressCount: aws.Int32(2),
			})
			must(t, err)
		}
	}
	for i, a := range atts {
		if i%3 == 1 {
			waitStatus(t, e, a.eni, world.StatusAvailable)
		}
	}
	// A new ENI takes each freed device index, likely in the same pass as
	// the detach: the node must end up with eth2 carrying the new MAC.
	for _, n := range nodes {
		e.createAttach(t, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnetA), SecondaryPrivateIpAddressCount: aws.Int32(1)}, n, 2)
	}
	syncPlane(t, e.plane)
	checkConverged(t, e.plane, e.sim.World())
}

// TestCleanupTakesOnlyItsPrefix leaves a plane's namespaces behind as a
// crash would, next to look-alikes of other runs, and checks that New
// refuses the prefix and Cleanup removes exactly that run's namespaces.
func TestCleanupTakesOnlyItsPrefix(t *testing.T) {
	requireRoot(t)
	e := startEnv(t)
	prefix := e.plane.Prefix()
	lookAlikes := []string{prefix + "0-vpc", prefix + "-i-notanid", prefix + "-vpcx", "x" + prefix + "-out"}
	for _, name := range lookAlikes {
		n, err := netnstest.Create(name)
		must(t, err)
		n.Close()
		t.Cleanup(func() { _ = netnstest.Delete(name) })
	}
	ours, err := ownedNamespaces(prefix)
	must(t, err)
	wantOurs := []string{prefix + "-" + nodeA, prefix + "-" + nodeB, prefix + "-out", prefix + "-vpc"}
	slices.Sort(wantOurs)
	if !slices.Equal(ours, wantOurs) {
		t.Fatalf("owned namespaces %v, want %v", ours, wantOurs)
	}

	stem := "allot-t-" + runID + "-"
	found, err := Prefixes(stem)
	must(t, err)
	if !slices.Contains(found, prefix) || !slices.Contains(found, prefix+"0") {
		t.Errorf("Prefixes(%s) = %v, want %s and the look-alike %s0 among them", stem, found, prefix, prefix)
	}

	if p2, err := New(Config{Prefix: prefix}); err == nil {
		_ = p2.Close()
		t.Fatalf("New accepted prefix %s while its namespaces exist", prefix)
	}

	must(t, Cleanup(prefix)) // as after a crash: the plane never closed
	if left, _ := ownedNamespaces(prefix); len(left) != 0 {
		t.Errorf("Cleanup left %v", left)
	}
	for _, name := range lookAlikes {
		if !slices.Contains(namespacesWithPrefix(t, name), name) {
			t.Errorf("Cleanup(%s) removed %s, which is not its own", prefix, name)
		}
	}
	// The crashed plane's Close finds nothing left and still succeeds.
	must(t, e.plane.Close())
	p3, err := New(Config{Prefix: prefix})
	must(t, err)
	must(t, p3.Close())
}

func TestOwns(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{
		{"run1-vpc", true},
		{"run1-out", true},
		{"run1-i-0123456789abcdef0", true},
		{"run1-i-01234567", true},
		{"run12-vpc", false},
		{"run1-vpc2", false},
		{"run1-i-xyz", false},
		{"run1-eni-0123456789abcdef0", false},
		{"xrun1-vpc", false},
		{"run1", false},
	} {
		if got := owns("run1", c.name); got != c.want {
			t.Errorf("owns(run1, %s) = %v, want %v", c.name, got, c.want)
		}
	}
	for _, bad := range []string{"", "-x", "a/b", "a b", strings.Repeat("a", 201)} {
		if checkPrefix(bad) == nil {
			t.Errorf("prefix %q accepted", bad)
		}
	}
}

func TestIntervalElements(t *testing.T) {
	pf := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	for _, c := range []struct {
		in   []netip.Prefix
		want []string
	}{
		{pf("10.0.0.4/32"), []string{"10.0.0.4/false", "10.0.0.5/true"}},
		// Adjacent addresses merge: an end and a start on one key is refused.
		{pf("10.0.0.4/32", "10.0.0.5/32", "10.0.0.9/32"), []string{"10.0.0.4/false", "10.0.0.6/true", "10.0.0.9/false", "10.0.0.10/true"}},
		{pf("10.0.0.15/32", "10.0.0.16/28", "10.0.0.32/28"), []string{"10.0.0.15/false", "10.0.0.48/true"}},
		{pf("255.255.255.255/32"), []string{"255.255.255.255/false"}},
	} {
		var got []string
		for _, e := range intervalElements(c.in) {
			got = append(got, fmt.Sprintf("%v/%v", net.IP(e.Key), e.IntervalEnd))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("intervalElements(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestSyncBeforeBind(t *testing.T) {
	requireRoot(t)
	p := newPlane(t)
	if err := p.Sync(context.Background()); err == nil {
		t.Errorf("Sync before Bind succeeded")
	}
	// Marks made before Bind wait for it instead of being lost.
	p.Hooks().OnAddressesChanged(world.NetworkInterface{ID: "eni-0123456789abcdef0"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	must(t, p.Bind(world.New(world.Config{})))
	must(t, p.Sync(ctx))
}
