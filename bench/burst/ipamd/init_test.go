package ipamd

import (
	"context"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
)

// startSim runs awssim with one c5.xlarge in a /16 and returns a node
// model for it (not started).
func startSim(t *testing.T, cfg Config) (*awssim.Sim, *Node) {
	t.Helper()
	const scale = 100
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	sim, err := awssim.Start(ctx, awssim.Config{TimeScale: scale, Seed: 1, Scenario: scenario.Scenario{
		Region: "us-east-1", AccountID: "123456789012",
		VPCs:      []scenario.VPC{{CIDRs: []string{"10.0.0.0/16"}, Subnets: []scenario.Subnet{{Name: "a", CIDR: "10.0.0.0/16", AZ: "us-east-1a"}}}},
		Instances: []scenario.Instance{{Subnet: "a", Type: "c5.xlarge"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	insts := sim.World().Instances()
	imdsURL, err := sim.IMDSEndpoint(insts[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	cfg.InstanceID, cfg.IMDSEndpoint, cfg.EC2Endpoint = insts[0].ID, imdsURL, sim.EC2Endpoint()
	cfg.MaxENIs, cfg.IPv4PerENI, cfg.TimeScale, cfg.MaxAttempts = 4, 15, scale, 1
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sim, n
}

func calls(sim *awssim.Sim) map[string]int64 {
	out := map[string]int64{}
	for a, c := range sim.Counters() {
		if c.Calls > 0 {
			out[a] = c.Calls
		}
	}
	return out
}

// TestNodeInitCalls checks v1.23.1's nodeInit on a fresh node with subnet
// discovery: five EC2 calls, the last an Assign that fills the primary ENI.
func TestNodeInitCalls(t *testing.T) {
	sim, n := startSim(t, Config{WarmENITarget: 1, WarmPrefixTarget: 1, SubnetDiscovery: true, MaxPods: 58})
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"DescribeNetworkInterfaces": 1, "CreateTags": 1, "DescribeSubnets": 1,
		"ModifyNetworkInterfaceAttribute": 1, "AssignPrivateIpAddresses": 1}
	got := calls(sim)
	for a, c := range want {
		if got[a] != c {
			t.Errorf("%s: %d calls, want %d (all: %v)", a, got[a], c, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("calls %v, want exactly %v", got, want)
	}
	if s := n.ds.stats(); s.total != 14 {
		t.Errorf("datastore %+v after nodeInit, want 14 addresses on the primary ENI", s)
	}
	// A restart finds the tag in place and makes no CreateTags.
	sim.ResetCounters()
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := calls(sim); got["CreateTags"] != 0 || got["DescribeNetworkInterfaces"] == 0 {
		t.Errorf("restart made %v, want a describe and no CreateTags", got)
	}
}

// TestNewENIDescribesSubnetsTwice checks that a new ENI costs two
// DescribeSubnets with subnet discovery, and that the creation is abandoned,
// with no CreateNetworkInterface, when both fail.
func TestNewENIDescribesSubnetsTwice(t *testing.T) {
	sim, n := startSim(t, Config{WarmENITarget: 1, WarmPrefixTarget: 1, SubnetDiscovery: true, MaxPods: 58})
	ctx := context.Background()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	sim.ResetCounters()
	if err := n.tryAllocateENI(ctx); err != nil {
		t.Fatal(err)
	}
	got := calls(sim)
	if got["DescribeSubnets"] != 2 || got["CreateNetworkInterface"] != 1 || got["AttachNetworkInterface"] != 1 {
		t.Errorf("new ENI made %v, want 2 DescribeSubnets, 1 create, 1 attach", got)
	}
	if s := n.ds.stats(); s.enis != 2 || s.total != 28 {
		t.Errorf("datastore %+v, want 2 ENIs with 28 addresses", s)
	}

	sim.ResetCounters()
	sim.SetFaults(map[string]awssim.Fault{"DescribeSubnets": {ErrorRate: 1, ErrorCode: "RequestLimitExceeded"}})
	if err := n.tryAllocateENI(ctx); err == nil {
		t.Fatal("ENI allocated with DescribeSubnets failing, want the creation abandoned")
	}
	got = calls(sim)
	if got["DescribeSubnets"] != 2 || got["CreateNetworkInterface"] != 0 {
		t.Errorf("abandoned creation made %v, want 2 DescribeSubnets and no create", got)
	}
}

// TestTargets checks how much one call asks for under the tuned
// configurations (c5.xlarge: 14 slots per ENI).
func TestTargets(t *testing.T) {
	for _, tc := range []struct {
		name           string
		cfg            Config
		s              stats
		low            bool
		assign, create int
	}{
		{"default secondary: empty", Config{WarmENITarget: 1}, stats{enis: 1}, true, 14, 14},
		{"WARM_IP_TARGET=28: 10 free", Config{WarmIPTarget: 28}, stats{enis: 2, total: 20, assigned: 10}, true, 18, 14},
		{"WARM_IP_TARGET=5: met", Config{WarmIPTarget: 5}, stats{enis: 1, total: 14, assigned: 9}, false, 0, 0},
		{"MINIMUM_IP_TARGET=30: 14 total", Config{MinimumIPTarget: 30}, stats{enis: 1, total: 14, assigned: 14}, true, 16, 14},
		{"WARM_PREFIX_TARGET=1: none free", Config{PrefixMode: true, WarmPrefixTarget: 1}, stats{enis: 1, total: 16, assigned: 16, prefixes: 1}, true, 1, 1},
		{"WARM_PREFIX_TARGET=3: one free", Config{PrefixMode: true, WarmPrefixTarget: 3}, stats{enis: 1, total: 32, assigned: 16, prefixes: 2, freePrefixes: 1}, true, 2, 2},
		{"WARM_IP_TARGET=48 prefixes: 5 free", Config{PrefixMode: true, WarmIPTarget: 48}, stats{enis: 1, total: 16, assigned: 11, prefixes: 1}, true, 3, 3},
	} {
		n := &Node{cfg: tc.cfg, maxIPsPerENI: 14}
		if got := n.tooLow(tc.s); got != tc.low {
			t.Errorf("%s: tooLow = %v, want %v", tc.name, got, tc.low)
		}
		if !tc.low {
			continue
		}
		if got, _ := n.toAssign(tc.s); got != tc.assign {
			t.Errorf("%s: toAssign = %d, want %d", tc.name, got, tc.assign)
		}
		if got := n.toCreate(tc.s); got != tc.create {
			t.Errorf("%s: toCreate = %d, want %d", tc.name, got, tc.create)
		}
	}
}
