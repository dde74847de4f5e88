package executor_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
)

// Three subnets of one zone for pods, one for the nodes, one in another
// zone that a node of the first may never use.
const (
	nodeSubnet = "subnet-0a000000000000001"
	podSubnet1 = "subnet-0a000000000000011" // a /22: the most free addresses
	podSubnet2 = "subnet-0a000000000000012" // a /24
	podSubnet3 = "subnet-0a000000000000013" // a /25
	podSubnetB = "subnet-0b000000000000011"
	podSG      = "sg-0a11c0a0000000001"
)

func podSubnetsWorld(instanceType string, count int) *scenario.Scenario {
	return &scenario.Scenario{
		VPCs: []scenario.VPC{{
			ID:             "vpc-0123456789abcdef0",
			CIDRs:          []string{"10.0.0.0/16"},
			SecurityGroups: []string{podSG},
			Subnets: []scenario.Subnet{
				{ID: nodeSubnet, Name: "nodes", CIDR: "10.0.0.0/24", AZ: "us-east-1a"},
				{ID: podSubnet1, CIDR: "10.0.4.0/22", AZ: "us-east-1a"},
				{ID: podSubnet2, CIDR: "10.0.8.0/24", AZ: "us-east-1a"},
				{ID: podSubnet3, CIDR: "10.0.9.0/25", AZ: "us-east-1a"},
				{ID: podSubnetB, CIDR: "10.0.16.0/24", AZ: "us-east-1b"},
			},
		}},
		Instances: []scenario.Instance{{Subnet: "nodes", Type: instanceType, Count: count}},
	}
}

// recordPodSubnets records the pod subnets as the broker does when a pod
// network names them, each with headroom kept for others so that its
// budget (what the cluster may still add) is budgets[id].
func (e *env) recordPodSubnets(t *testing.T, budgets map[string]int64) {
	t.Helper()
	ctx := ctxT(t)
	for _, s := range e.sim.World().Subnets() {
		if s.ID == nodeSubnet {
			continue
		}
		if _, err := e.st.PutSubnet(ctx, store.Subnet{ID: s.ID, CIDR: s.CIDR, AvailabilityZone: s.AvailabilityZone,
			VPCID: s.VPCID, Usable: int64(s.Usable)}); err != nil {
			t.Fatalf("record subnet %s: %v", s.ID, err)
		}
		if b, ok := budgets[s.ID]; ok {
			if _, err := e.st.SetSubnetBudget(ctx, s.ID, int64(s.Usable)-b, 0); err != nil {
				t.Fatalf("budget of %s: %v", s.ID, err)
			}
		}
	}
}

func (e *env) putPodNetwork(t *testing.T, subnets ...string) {
	t.Helper()
	_, err := e.st.PutPodNetwork(ctxT(t), store.PodNetwork{
		Name: "pods-a", Selector: store.NodeSelector{AvailabilityZone: "us-east-1a"},
		SubnetIDs: subnets, SecurityGroups: []string{podSG}, UpdatedAt: time.Now(),
	}, 0)
	if err != nil {
		t.Fatalf("put pod network: %v", err)
	}
}

// newENIs returns the node's non-primary ENI records by device index.
func (e *env) newENIs(t *testing.T, instance string) []store.ENI {
	t.Helper()
	enis, err := e.st.ListNodeENIs(ctxT(t), instance)
	if err != nil {
		t.Fatalf("list enis: %v", err)
	}
	enis = slices.DeleteFunc(enis, func(x store.ENI) bool { return x.Primary })
	slices.SortFunc(enis, func(a, b store.ENI) int { return a.DeviceIndex - b.DeviceIndex })
	return enis
}

// Each new ENI goes to the subnet of the node's pod network with the most
// budget left, not the one with the most free addresses, and one node's
// ENIs end up in all three subnets of its zone. The primary ENI, in the
// node's own subnet, takes no pod addresses; the new ENIs carry the pod
// network's security group.
func TestNewENIsGoToTheSubnetWithMostHeadroom(t *testing.T) {
	e := newEnv(t, envOpts{scenario: podSubnetsWorld("c5.xlarge", 1)})
	// Budgets 100, 110 and 105: every new ENI of 14 addresses costs 15, so
	// the order is subnet 2 (110), subnet 3 (105), subnet 1 (100), although
	// subnet 1 has four times the free addresses of subnet 2.
	e.recordPodSubnets(t, map[string]int64{podSubnet1: 100, podSubnet2: 110, podSubnet3: 105})
	e.putPodNetwork(t, podSubnet1, podSubnet2, podSubnet3, podSubnetB)
	inst := e.insts[0]
	e.register(t, inst, 42, 0, nil)
	e.start(t, executor.Config{})
	waitFor(t, "42 addresses", 60*time.Second, func() (bool, error) {
		return e.satisfied(ctxT(t), map[string]int{inst.ID: 42})
	})

	got := e.newENIs(t, inst.ID)
	var where []string
	for _, x := range got {
		where = append(where, x.SubnetID)
	}
	if want := []string{podSubnet2, podSubnet3, podSubnet1}; !slices.Equal(where, want) {
		t.Errorf("new ENIs by device index are in %v; want %v", where, want)
	}
	for _, x := range e.ours() {
		if !slices.Equal(x.SecurityGroups, []string{podSG}) {
			t.Errorf("ENI %s has groups %v; want the pod network's %s", x.ID, x.SecurityGroups, podSG)
		}
	}
	for _, x := range e.sim.World().AllNetworkInterfaces() {
		if x.ID == inst.NetworkInterfaces[0].ID && len(x.SecondaryIPs) > 0 {
			t.Errorf("primary ENI %s holds pod addresses %v though the node follows a pod network", x.ID, x.SecondaryIPs)
		}
	}
	e.checkMatchesEC2(t)
}

// A pod network's new subnets apply to new ENIs only: an ENI made in the
// old subnet stays there and is still used.
func TestPodNetworkChangeMovesOnlyNewENIs(t *testing.T) {
	e := newEnv(t, envOpts{scenario: podSubnetsWorld("c5.xlarge", 1)})
	e.recordPodSubnets(t, nil)
	e.putPodNetwork(t, podSubnet2)
	inst := e.insts[0]
	e.register(t, inst, 5, 0, func(n *store.Node) { n.WarmIPTarget = 1 })
	e.start(t, executor.Config{})
	waitFor(t, "the first ENI", 60*time.Second, func() (bool, error) {
		return e.satisfied(ctxT(t), map[string]int{inst.ID: 5})
	})
	first := e.newENIs(t, inst.ID)
	if len(first) != 1 || first[0].SubnetID != podSubnet2 {
		t.Fatalf("after the first demand: %+v; want one ENI in %s", first, podSubnet2)
	}

	e.putPodNetwork(t, podSubnet3)
	e.demand(t, inst.ID, 20, 0)
	waitFor(t, "25 addresses", 60*time.Second, func() (bool, error) {
		return e.satisfied(ctxT(t), map[string]int{inst.ID: 25})
	})
	after := e.newENIs(t, inst.ID)
	if len(after) < 2 || after[0].ID != first[0].ID || after[0].SubnetID != podSubnet2 {
		t.Fatalf("after the change: %+v; want %s kept in %s first", after, first[0].ID, podSubnet2)
	}
	if len(after[0].Addresses) <= len(first[0].Addresses) && len(first[0].Addresses) < 14 {
		t.Errorf("the old ENI was not used after the change: %d addresses, had %d", len(after[0].Addresses), len(first[0].Addresses))
	}
	for _, x := range after[1:] {
		if x.SubnetID != podSubnet3 {
			t.Errorf("new ENI %s is in %s; want the network's new subnet %s", x.ID, x.SubnetID, podSubnet3)
		}
	}
}

// A prefix-mode node whose subnet has no free /28 gets secondary addresses
// there, and the subnet is remembered as such with EC2's answer; a node in
// another subnet keeps getting prefixes.
func TestPrefixFallbackOnFragmentedSubnet(t *testing.T) {
	sc := podSubnetsWorld("c5.xlarge", 1)
	sc.Instances = append(sc.Instances, scenario.Instance{Subnet: podSubnet2, Type: "c5.xlarge"})
	e := newEnv(t, envOpts{scenario: sc})
	if n, err := e.sim.World().FragmentSubnet(nodeSubnet); err != nil || n == 0 {
		t.Fatalf("fragment %s: %d, %v", nodeSubnet, n, err)
	}
	prefix := func(n *store.Node) { n.Mode = "prefix" }
	var frag, whole string
	for _, inst := range e.insts {
		e.register(t, inst, 20, 0, prefix)
		if inst.SubnetID == nodeSubnet {
			frag = inst.ID
		} else {
			whole = inst.ID
		}
	}
	e.start(t, executor.Config{})
	waitFor(t, "20 addresses each", 60*time.Second, func() (bool, error) {
		return e.satisfied(ctxT(t), map[string]int{frag: 20, whole: 20})
	})

	addrs := func(id string) (a, p int) {
		enis, err := e.st.ListNodeENIs(ctxT(t), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range enis {
			a, p = a+len(x.Addresses), p+len(x.Prefixes)
		}
		return a, p
	}
	if a, p := addrs(frag); a < 20 || p != 0 {
		t.Errorf("node in the fragmented subnet: %d addresses, %d prefixes; want 20 secondary addresses, no prefix", a, p)
	}
	if a, p := addrs(whole); a != 0 || p < 2 {
		t.Errorf("node in the other subnet: %d addresses, %d prefixes; want prefixes only", a, p)
	}
	sn, err := e.st.GetSubnet(ctxT(t), nodeSubnet)
	if err != nil {
		t.Fatal(err)
	}
	if !sn.NoPrefix(time.Now()) || !strings.Contains(sn.NoPrefixReason, "InsufficientCidrBlocks") {
		t.Errorf("fragmented subnet record: no prefix until %v (%q); want a time ahead and EC2's InsufficientCidrBlocks", sn.NoPrefixUntil, sn.NoPrefixReason)
	}
	if other, err := e.st.GetSubnet(ctxT(t), podSubnet2); err != nil || !other.NoPrefixUntil.IsZero() {
		t.Errorf("whole subnet record: %+v, %v; want no fallback", other, err)
	}
}

// A prefix-mode node whose pod network has a fragmented subnet and a whole
// one: the fragmented one has the most budget and is tried first; after
// EC2's InsufficientCidrBlocks the node's new ENIs go to the whole subnet,
// still with prefixes.
func TestPrefixFallbackKeepsOtherSubnetsInPrefixMode(t *testing.T) {
	e := newEnv(t, envOpts{scenario: podSubnetsWorld("c5.xlarge", 1)})
	if n, err := e.sim.World().FragmentSubnet(podSubnet1); err != nil || n == 0 {
		t.Fatalf("fragment %s: %d, %v", podSubnet1, n, err)
	}
	e.recordPodSubnets(t, nil) // the /22 has the most budget
	e.putPodNetwork(t, podSubnet1, podSubnet3)
	inst := e.insts[0]
	e.register(t, inst, 20, 0, func(n *store.Node) { n.Mode = "prefix" })
	e.start(t, executor.Config{})
	waitFor(t, "20 addresses", 60*time.Second, func() (bool, error) {
		return e.satisfied(ctxT(t), map[string]int{inst.ID: 20})
	})
	for _, x := range e.newENIs(t, inst.ID) {
		if x.SubnetID != podSubnet3 || len(x.Prefixes) == 0 || len(x.Addresses) != 0 {
			t.Errorf("ENI %s in %s with %d prefixes and %d addresses; want prefixes only, in %s",
				x.ID, x.SubnetID, len(x.Prefixes), len(x.Addresses), podSubnet3)
		}
	}
	sn, err := e.st.GetSubnet(ctxT(t), podSubnet1)
	if err != nil {
		t.Fatal(err)
	}
	if !sn.NoPrefix(time.Now()) {
		t.Errorf("fragmented subnet not recorded as giving no /28: %+v", sn)
	}
}
