package ec2client

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/broker/ratelimit"
)

func ids(es []ENIInfo) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.ID)
	}
	sort.Strings(out)
	return out
}

func sorted(s ...string) []string { sort.Strings(s); return s }

func TestDescribeENIsFilters(t *testing.T) {
	sim := startSim(t, testScenario())
	c := newClient(t, sim, nil, 0)
	ctx := context.Background()
	mk := func(subnet string, tags map[string]string) string {
		e, err := c.CreateENI(ctx, CreateENIInput{SubnetID: subnet, SecondaryCount: 1, Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	ours := mk(testSubnet, map[string]string{TagCluster: "a", TagOwner: OwnerValue})
	oursB := mk(testSubnetB, map[string]string{TagCluster: "a", TagOwner: OwnerValue})
	other := mk(testSubnet, map[string]string{TagCluster: "b", TagOwner: OwnerValue})
	untagged := mk(testSubnet, nil)
	attID, err := c.AttachENI(ctx, ours, testInstance, 2)
	if err != nil || attID == "" {
		t.Fatalf("attach: %q, %v", attID, err)
	}
	waitStatus(t, c, ours, "in-use")
	primary := sim.World().AllNetworkInterfaces()

	var primaryOfInstance string
	for _, n := range primary {
		if n.Attachment != nil && n.Attachment.InstanceID == testInstance && n.Attachment.DeviceIndex == 0 {
			primaryOfInstance = n.ID
		}
	}

	tests := []struct {
		name string
		in   DescribeENIsInput
		want []string
	}{
		{"by cluster tag", DescribeENIsInput{Tags: map[string]string{TagCluster: "a"}}, sorted(ours, oursB)},
		{"by two tags", DescribeENIsInput{Tags: map[string]string{TagCluster: "b", TagOwner: OwnerValue}}, []string{other}},
		{"by tag key", DescribeENIsInput{TagKeys: []string{TagOwner}}, sorted(ours, oursB, other)},
		{"tag keys are ANDed", DescribeENIsInput{TagKeys: []string{TagOwner, "missing"}}, nil},
		{"by subnet and tag", DescribeENIsInput{SubnetID: testSubnetB, TagKeys: []string{TagCluster}}, []string{oursB}},
		{"by instance", DescribeENIsInput{InstanceID: testInstance}, sorted(ours, primaryOfInstance)},
		{"by status", DescribeENIsInput{Status: "available"}, sorted(oursB, other, untagged)},
		{"by IDs, a missing one ignored", DescribeENIsInput{IDs: []string{untagged, other, "eni-0123456789abcdef0"}}, sorted(untagged, other)},
	}
	for _, tt := range tests {
		got, err := c.DescribeENIs(ctx, tt.in)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if g := ids(got); !reflect.DeepEqual(g, tt.want) && !(len(g) == 0 && len(tt.want) == 0) {
			t.Errorf("%s: got %v, want %v", tt.name, g, tt.want)
		}
	}
	// Every Describe drew from the filtered bucket.
	st := c.Limiter().Stats()
	if st[ratelimit.DescribeUnfiltered].Taken != 0 || st[ratelimit.Describe].Taken == 0 {
		t.Errorf("limiter stats %+v: describes should all be in the filtered class", st)
	}
	if n := sim.Counters()["DescribeNetworkInterfaces"].Throttled; n != 0 {
		t.Errorf("awssim throttled %d describes", n)
	}
}

// TestDescribeENIsPaginates: more ENIs than one page (1000) come back
// complete, in two calls.
func TestDescribeENIsPaginates(t *testing.T) {
	sim := startSim(t, testScenario())
	const n = 1003
	for i := 0; i < n; i++ {
		_, err := sim.World().CreateNetworkInterface(world.CreateNetworkInterfaceInput{
			SubnetID: testSubnet, Tags: map[string]string{TagCluster: "big"},
		})
		if err != nil {
			t.Fatalf("seed ENI %d: %v", i, err)
		}
	}
	c := newClient(t, sim, nil, 0)
	got, err := c.DescribeENIs(context.Background(), DescribeENIsInput{Tags: map[string]string{TagCluster: "big"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range got {
		seen[e.ID] = true
	}
	if len(got) != n || len(seen) != n {
		t.Errorf("got %d ENIs (%d distinct), want %d", len(got), len(seen), n)
	}
	if calls := c.Calls()["DescribeNetworkInterfaces"]; calls != 2 {
		t.Errorf("%d describe calls, want 2 pages", calls)
	}

	// By ID: EC2 takes at most 200 values in a filter, so 1003 IDs go out
	// in six chunks and all come back.
	ids := make([]string, 0, n)
	for id := range seen {
		ids = append(ids, id)
	}
	byID, err := c.DescribeENIs(context.Background(), DescribeENIsInput{IDs: ids})
	if err != nil {
		t.Fatalf("describe %d ENIs by ID: %v", len(ids), err)
	}
	if len(byID) != n {
		t.Errorf("described %d ENIs by ID, want %d", len(byID), n)
	}
	if calls := c.Calls()["DescribeNetworkInterfaces"]; calls != 2+6 {
		t.Errorf("%d describe calls in all, want 2 pages + 6 chunks", calls)
	}
	checkCountersAgree(t, c, sim)
}

func TestDescribeSubnetsTypesInstances(t *testing.T) {
	sim := startSim(t, testScenario())
	c := newClient(t, sim, nil, 0)
	ctx := context.Background()

	subnets, err := c.DescribeSubnets(ctx, []string{testSubnet, testSubnetB})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(subnets, func(i, j int) bool { return subnets[i].ID < subnets[j].ID })
	if len(subnets) != 2 {
		t.Fatalf("subnets = %+v", subnets)
	}
	for i, want := range []struct{ id, cidr, az string }{
		{testSubnet, "10.0.0.0/20", "us-east-1a"}, {testSubnetB, "10.0.16.0/24", "us-east-1b"},
	} {
		s := subnets[i]
		w, _ := sim.World().Subnet(want.id)
		if s.ID != want.id || s.CIDR != want.cidr || s.AZ != want.az || s.VPCID == "" || s.Available != int64(w.AvailableIPs) {
			t.Errorf("subnet %d = %+v, want %v with %d available", i, s, want, w.AvailableIPs)
		}
	}
	if _, err := c.DescribeSubnets(ctx, []string{"subnet-0123456789abcdef0"}); !IsNotFound(err) {
		t.Errorf("unknown subnet: %v, want NotFound", err)
	}

	limits, err := c.DescribeInstanceTypes(ctx, []string{"c5.xlarge", "t2.medium", "m5.large"})
	if err != nil {
		t.Fatal(err)
	}
	wantLimits := map[string]InstanceTypeInfo{
		"c5.xlarge": {MaxENIs: 4, IPv4PerENI: 15, Nitro: true, VCPUs: 4},
		"t2.medium": {MaxENIs: 3, IPv4PerENI: 6, Nitro: false, VCPUs: 2},
		"m5.large":  {MaxENIs: 3, IPv4PerENI: 10, Nitro: true, VCPUs: 2},
	}
	if !reflect.DeepEqual(limits, wantLimits) {
		t.Errorf("instance types = %v, want %v", limits, wantLimits)
	}

	insts, err := c.DescribeInstances(ctx, []string{testXen, testInstance, "i-0123456789abcdef0"})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(insts, func(i, j int) bool { return insts[i].ID < insts[j].ID })
	want := []InstanceInfo{
		{ID: testInstance, Type: "c5.xlarge", State: "running", AZ: "us-east-1a", SubnetID: testSubnet},
		{ID: testXen, Type: "t2.medium", State: "running", AZ: "us-east-1b", SubnetID: testSubnetB},
	}
	// What the network interfaces add is checked against awssim's own
	// record below; the rest must match exactly.
	basic := make([]InstanceInfo, len(insts))
	for i, in := range insts {
		basic[i] = InstanceInfo{ID: in.ID, Type: in.Type, State: in.State, AZ: in.AZ, SubnetID: in.SubnetID}
	}
	if !reflect.DeepEqual(basic, want) {
		t.Errorf("instances = %+v, want %+v", basic, want)
	}
	for _, in := range insts {
		w, ok := sim.World().Instance(in.ID)
		if !ok {
			t.Fatalf("awssim has no %s", in.ID)
		}
		if in.OwnerID != sim.World().AccountID() || in.VPCID != w.VPCID || in.PrimaryIP != w.PrivateIP ||
			in.PrimaryENI == "" || len(in.SecurityGroups) == 0 {
			t.Errorf("instance %s: owner %q vpc %q primary %q %q groups %v; awssim: account %q vpc %q ip %q",
				in.ID, in.OwnerID, in.VPCID, in.PrimaryENI, in.PrimaryIP, in.SecurityGroups,
				sim.World().AccountID(), w.VPCID, w.PrivateIP)
		}
	}
	all, err := c.DescribeInstances(ctx, nil)
	if err != nil || len(all) != 2 {
		t.Errorf("all instances = %v, %v", all, err)
	}
	checkCountersAgree(t, c, sim)
	if got := fmt.Sprint(c.Limiter().Stats()[ratelimit.DescribeUnfiltered]); c.Limiter().Stats()[ratelimit.DescribeUnfiltered].Taken != 0 {
		t.Errorf("unfiltered bucket used: %s", got)
	}
}
