package server

import (
	"maps"
	"testing"

	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

func TestMaxPods(t *testing.T) {
	for _, tc := range []struct {
		enis, ips, vcpus int
		prefix           bool
		want             int64
	}{
		{3, 10, 2, false, 29},    // m5.large: EKS publishes 29
		{4, 15, 4, false, 58},    // c5.xlarge: 58
		{3, 6, 2, false, 17},     // t3.medium: 17
		{15, 50, 96, false, 737}, // m5.24xlarge: 737
		{3, 10, 2, true, 110},    // m5.large with prefixes: 3*9*16+2 = 434, capped at 110
		{15, 50, 96, true, 250},  // 30 vCPUs or more: 250
		{1, 1, 2, false, 0},      // no slot for pods
	} {
		got, formula := MaxPods(tc.enis, tc.ips, tc.vcpus, tc.prefix)
		if got != tc.want || formula == "" {
			t.Errorf("MaxPods(%d, %d, %d, %v) = %d (%q), want %d", tc.enis, tc.ips, tc.vcpus, tc.prefix, got, formula, tc.want)
		}
	}
}

// capacityView is three subnets in two zones: a with a full-ish m5.large,
// b with no node at all, c (a /28) whose addresses run out before its
// node's slots do.
func capacityView() *view {
	v := &view{rev: 7, usage: map[string]store.Usage{}}
	v.subnets = []store.Subnet{
		{ID: "subnet-a", CIDR: "10.0.0.0/24", AvailabilityZone: "us-east-1a", Usable: 251, Attached: 10},
		{ID: "subnet-b", CIDR: "10.0.1.0/24", AvailabilityZone: "us-east-1b", Usable: 251},
		{ID: "subnet-c", CIDR: "10.0.2.0/28", AvailabilityZone: "us-east-1a", Usable: 11, UsedByOthers: 1, Attached: 2},
	}
	v.nodes = []store.Node{
		{InstanceID: "i-a", SubnetID: "subnet-a", Mode: store.ModeSecondaryIP, MaxENIs: 3, IPv4PerENI: 10},
		{InstanceID: "i-c", SubnetID: "subnet-c", Mode: store.ModeSecondaryIP, MaxENIs: 3, IPv4PerENI: 10},
	}
	v.enis = []store.ENI{
		{ID: "eni-a0", InstanceID: "i-a", SubnetID: "subnet-a", Primary: true, Status: store.ENIAttached, Addresses: addrs("10.0.0", 10, 9)},
		{ID: "eni-a1", InstanceID: "i-a", SubnetID: "subnet-a", Status: store.ENIAttached, DeviceIndex: 1, Addresses: addrs("10.0.0", 20, 1)},
		{ID: "eni-c0", InstanceID: "i-c", SubnetID: "subnet-c", Primary: true, Status: store.ENIAttached, Addresses: addrs("10.0.2", 5, 2)},
	}
	v.usage["i-a"] = store.Usage{InstanceID: "i-a", Assigned: addrs("10.0.0", 10, 9), Free: addrs("10.0.0", 20, 1)}
	v.usage["i-c"] = store.Usage{InstanceID: "i-c", Assigned: addrs("10.0.2", 5, 2)}
	v.index()
	return v
}

// TestCapacityTotalsAndBinding: every zone's figures, and the cluster's,
// are the sums of their subnets'; each subnet's pod headroom is the lesser
// of what its addresses and its nodes allow and names that one.
func TestCapacityTotalsAndBinding(t *testing.T) {
	resp := capacity(capacityView())
	byID := map[string]*allotv1.SubnetBudget{}
	for _, b := range resp.GetSubnets() {
		byID[b.GetSubnetId()] = b
	}
	// a: the m5.large holds 27 pod addresses, 9 in use: 18 more; its
	// subnet's addresses allow far more, so the node binds.
	// b: no node registered: nothing can take a pod there.
	// c: 8 addresses left in the /28 (limit 10, 2 attached): 7 fill the
	// primary ENI's free slots, and 1 cannot buy a new ENI (it needs a
	// primary address too), for 25 free node slots.
	for id, want := range map[string]struct {
		pods, nodePods int64
		binding        string
	}{
		"subnet-a": {18, 18, bindNodes},
		"subnet-b": {0, 0, bindNodes},
		"subnet-c": {7, 25, bindAddresses},
	} {
		p := byID[id].GetPods()
		if p.GetPods() != want.pods || p.GetNodePods() != want.nodePods || p.GetBinding() != want.binding {
			t.Errorf("%s: pods %d node_pods %d address_pods %d binding %q; want %d %d %q",
				id, p.GetPods(), p.GetNodePods(), p.GetAddressPods(), p.GetBinding(), want.pods, want.nodePods, want.binding)
		}
		if p.GetPods() != min(p.GetAddressPods(), p.GetNodePods()) {
			t.Errorf("%s: pods %d is not min(%d, %d)", id, p.GetPods(), p.GetAddressPods(), p.GetNodePods())
		}
	}

	zones := map[string][]string{"us-east-1a": {"subnet-a", "subnet-c"}, "us-east-1b": {"subnet-b"}}
	if len(resp.GetZones()) != len(zones) {
		t.Fatalf("zones %v", resp.GetZones())
	}
	for _, z := range resp.GetZones() {
		checkSum(t, z, zones[z.GetAvailabilityZone()], byID)
	}
	checkSum(t, resp.GetCluster(), []string{"subnet-a", "subnet-b", "subnet-c"}, byID)
	if b := resp.GetCluster().GetPods().GetBinding(); b != bindMixed {
		t.Errorf("cluster binding %q, want %q", b, bindMixed)
	}
	if resp.GetRevision() != 7 {
		t.Errorf("revision %d", resp.GetRevision())
	}
}

// checkSum fails unless every figure of total is the sum over ids.
func checkSum(t *testing.T, total *allotv1.CapacityTotal, ids []string, byID map[string]*allotv1.SubnetBudget) {
	t.Helper()
	got := []int64{total.GetSubnets(), total.GetUsable(), total.GetLimit(), total.GetAttached(), total.GetAssigned(), total.GetWarm(),
		total.GetReserved(), total.GetUsedByOthers(), total.GetHeadroom(), total.GetAvailable(), total.GetHeadroomPods(),
		total.GetPods().GetPods(), total.GetPods().GetAddressPods(), total.GetPods().GetNodePods(), total.GetPods().GetNodes()}
	var sums [15]int64
	for _, id := range ids {
		b := byID[id]
		for i, x := range []int64{1, b.GetUsable(), b.GetLimit(), b.GetAttached(), b.GetAssigned(), b.GetWarm(),
			b.GetReserved(), b.GetUsedByOthers(), b.GetHeadroom(), b.GetAvailable(), b.GetHeadroomPods(),
			b.GetPods().GetPods(), b.GetPods().GetAddressPods(), b.GetPods().GetNodePods(), b.GetPods().GetNodes()} {
			sums[i] += x
		}
	}
	for i := range sums {
		if got[i] != sums[i] {
			t.Errorf("%q: figure %d is %d, the sum of its subnets is %d", total.GetAvailabilityZone(), i, got[i], sums[i])
		}
	}
	if total.GetSubnets() != int64(len(ids)) || total.GetSubnets() == 0 {
		t.Errorf("%q: %d subnets, want %d", total.GetAvailabilityZone(), total.GetSubnets(), len(ids))
	}
}

// TestCapacityCountsNodesWhereTheirPodsGo: a node whose pod network sends
// its new ENIs to other subnets is counted in the one its next ENI goes to
// (the most budget left), not in the subnet it registered in, and the
// zone's total is still the sum of its subnets.
func TestCapacityCountsNodesWhereTheirPodsGo(t *testing.T) {
	v := &view{rev: 3, usage: map[string]store.Usage{}}
	v.subnets = []store.Subnet{
		{ID: "subnet-node", CIDR: "10.0.0.0/24", AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Usable: 251, UsedByOthers: 1},
		{ID: "subnet-p1", CIDR: "100.64.0.0/24", AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Usable: 251, Headroom: 200},
		{ID: "subnet-p2", CIDR: "100.64.1.0/24", AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Usable: 251},
	}
	v.nodes = []store.Node{{InstanceID: "i-a", SubnetID: "subnet-node", AvailabilityZone: "us-east-1a", VPCID: "vpc-1",
		Mode: store.ModeSecondaryIP, MaxENIs: 3, IPv4PerENI: 10}}
	v.podnets = []store.PodNetwork{{Name: "pods", Selector: store.NodeSelector{AvailabilityZone: "us-east-1a"},
		SubnetIDs: []string{"subnet-p1", "subnet-p2"}}}
	v.index()
	resp := capacity(v)
	nodes := map[string]int64{}
	for _, b := range resp.GetSubnets() {
		nodes[b.GetSubnetId()] = b.GetPods().GetNodes()
	}
	if want := map[string]int64{"subnet-node": 0, "subnet-p1": 0, "subnet-p2": 1}; !maps.Equal(nodes, want) {
		t.Errorf("nodes counted per subnet %v; want %v (p2 has the most budget left)", nodes, want)
	}
	byID := map[string]*allotv1.SubnetBudget{}
	for _, b := range resp.GetSubnets() {
		byID[b.GetSubnetId()] = b
	}
	checkSum(t, resp.GetZones()[0], []string{"subnet-node", "subnet-p1", "subnet-p2"}, byID)
}

// TestCapacityNodeSlotsUnderCustomNetworking: a c5.xlarge (4 ENIs of 15
// addresses) whose pod network leaves out its own subnet gets no pods on
// its primary ENI, so its pod slots are 3 x 14 = 42, less its 5 pods; with
// a network that includes its subnet, or none, all 4 x 14 = 56 count.
func TestCapacityNodeSlotsUnderCustomNetworking(t *testing.T) {
	five := store.Usage{InstanceID: "i-a", Assigned: []string{"a", "b", "c", "d", "e"}}
	for name, tc := range map[string]struct {
		subnets []string
		want    int64
	}{
		"network leaves out the node's subnet": {[]string{"subnet-p1"}, 42 - 5},
		"network includes the node's subnet":   {[]string{"subnet-p1", "subnet-node"}, 56 - 5},
		"no network":                           {nil, 56 - 5},
	} {
		t.Run(name, func(t *testing.T) {
			v := &view{rev: 3, usage: map[string]store.Usage{"i-a": five}}
			v.subnets = []store.Subnet{
				{ID: "subnet-node", CIDR: "10.0.0.0/24", AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Usable: 251},
				{ID: "subnet-p1", CIDR: "100.64.0.0/22", AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Usable: 1019},
			}
			v.nodes = []store.Node{{InstanceID: "i-a", InstanceType: "c5.xlarge", SubnetID: "subnet-node",
				AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Mode: store.ModeSecondaryIP, MaxENIs: 4, IPv4PerENI: 15}}
			if tc.subnets != nil {
				v.podnets = []store.PodNetwork{{Name: "pods", Selector: store.NodeSelector{AvailabilityZone: "us-east-1a"},
					SubnetIDs: tc.subnets}}
			}
			v.index()
			resp := capacity(v)
			if got := resp.GetCluster().GetPods().GetNodePods(); got != tc.want {
				t.Errorf("node pod slots %d, want %d", got, tc.want)
			}
		})
	}
}

// TestHeadroomLeavesOutClosedPrimaries: a prefix-mode node whose pod
// network leaves out its own subnet has a primary ENI there that takes no
// pods, so its 14 free /28 slots are no room in that subnet: the subnet's
// headroom_pods is what its other node (an m5.large, 9 per ENI) makes of
// the 249 available addresses, 9 on its own primary and 24 new ENIs of
// 1 + 9, 225 in all. Counting the closed slots gave 9 + 14 x 16 + 9 + 5 =
// 247, as it rightly is when the network includes the subnet, or with none.
func TestHeadroomLeavesOutClosedPrimaries(t *testing.T) {
	for name, tc := range map[string]struct {
		podnets []store.PodNetwork
		want    int64
	}{
		"network leaves out the node's subnet": {[]store.PodNetwork{{Name: "custom",
			Selector: store.NodeSelector{NodeGroup: "custom"}, SubnetIDs: []string{"subnet-p1"}}}, 225},
		"network includes the node's subnet": {[]store.PodNetwork{{Name: "custom",
			Selector: store.NodeSelector{NodeGroup: "custom"}, SubnetIDs: []string{"subnet-p1", "subnet-node"}}}, 247},
		"no network": {nil, 247},
	} {
		t.Run(name, func(t *testing.T) {
			v := &view{rev: 3, usage: map[string]store.Usage{}, podnets: tc.podnets}
			v.subnets = []store.Subnet{
				{ID: "subnet-node", CIDR: "10.0.0.0/24", AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Usable: 251, UsedByOthers: 2},
				{ID: "subnet-p1", CIDR: "100.64.0.0/22", AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Usable: 1019},
			}
			v.nodes = []store.Node{
				{InstanceID: "i-a", InstanceType: "c5.xlarge", SubnetID: "subnet-node", PrimaryENIID: "eni-a",
					AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Mode: store.ModePrefix, MaxENIs: 4, IPv4PerENI: 15,
					Tags: map[string]string{allotv1.NodeGroupTag: "custom"}},
				{InstanceID: "i-b", InstanceType: "m5.large", SubnetID: "subnet-node", PrimaryENIID: "eni-b",
					AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Mode: store.ModeSecondaryIP, MaxENIs: 3, IPv4PerENI: 10},
			}
			v.enis = []store.ENI{
				{ID: "eni-a", InstanceID: "i-a", SubnetID: "subnet-node", Primary: true, PrimaryIP: "10.0.0.10", Status: store.ENIAttached},
				{ID: "eni-b", InstanceID: "i-b", SubnetID: "subnet-node", Primary: true, PrimaryIP: "10.0.0.11", Status: store.ENIAttached},
			}
			v.index()
			for _, b := range capacity(v).GetSubnets() {
				if b.GetSubnetId() == "subnet-node" && b.GetHeadroomPods() != tc.want {
					t.Errorf("subnet-node headroom_pods %d, want %d", b.GetHeadroomPods(), tc.want)
				}
			}
			got, err := findBudget(v, "subnet-node")
			if err != nil || got.GetHeadroomPods() != tc.want {
				t.Errorf("GetSubnetBudget: %v, %v; want headroom_pods %d", got, err, tc.want)
			}
		})
	}
}
