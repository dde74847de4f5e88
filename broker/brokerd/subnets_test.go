package brokerd_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/broker/brokerd"
	"github.com/allotnet/allot/broker/clock"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/subnets"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// TestBudgetsOnEmptyCluster: with pod subnets selected by VPC, or by the
// kubernetes.io/role/cni tag within it, BudgetService lists every selected
// subnet with its size before any node registers; subnets of another VPC,
// or untagged ones when a tag is asked for, are not listed.
func TestBudgetsOnEmptyCluster(t *testing.T) {
	cni := map[string]string{"kubernetes.io/role/cni": "1"}
	sc := scenario.Scenario{VPCs: []scenario.VPC{
		{ID: "vpc-0123456789abcdef0", CIDRs: []string{"10.0.0.0/16"}, Subnets: []scenario.Subnet{
			{ID: "subnet-0aaaaaaaaaaaaaaaa", Name: "a", CIDR: "10.0.0.0/20", AZ: "us-east-1a", Tags: cni},
			{ID: "subnet-0bbbbbbbbbbbbbbbb", Name: "b", CIDR: "10.0.16.0/20", AZ: "us-east-1b", Tags: cni},
			{ID: "subnet-0cccccccccccccccc", Name: "c", CIDR: "10.0.32.0/24", AZ: "us-east-1a"},
		}},
		{ID: "vpc-0fedcba9876543210", CIDRs: []string{"10.1.0.0/16"}, Subnets: []scenario.Subnet{
			{ID: "subnet-0dddddddddddddddd", Name: "d", CIDR: "10.1.0.0/20", AZ: "us-east-1a", Tags: cni},
		}},
	}}
	for name, tc := range map[string]struct {
		sel  subnets.Selector
		want []string
	}{
		"by vpc": {subnets.Selector{VPCIDs: []string{"vpc-0123456789abcdef0"}},
			[]string{"subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb", "subnet-0cccccccccccccccc"}},
		"by tag in vpc": {subnets.Selector{VPCIDs: []string{"vpc-0123456789abcdef0"}, Tags: map[string]string{"kubernetes.io/role/cni": ""}},
			[]string{"subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"}},
		"by id": {subnets.Selector{IDs: []string{"subnet-0dddddddddddddddd"}}, []string{"subnet-0dddddddddddddddd"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := emptyClusterBudgets(t, sc, tc.sel, len(tc.want))
			var ids []string
			for _, b := range got {
				ids = append(ids, b.GetSubnetId())
				if b.GetUsable() <= 0 || b.GetAvailabilityZone() == "" || b.GetCidr() == "" {
					t.Errorf("budget without its size or zone: %v", b)
				}
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("budgets list %v, want %v", ids, tc.want)
			}
		})
	}
}

// TestMaxPodsFromEC2: GetMaxPods answers from DescribeInstanceTypes
// (awssim's catalog), with EKS's published figures; an unknown type is
// NotFound, prefixes on a Xen type InvalidArgument.
func TestMaxPodsFromEC2(t *testing.T) {
	bc := startEmpty(t, scenario.Scenario{VPCs: []scenario.VPC{{ID: "vpc-0123456789abcdef0", CIDRs: []string{"10.0.0.0/16"}}}}, subnets.Selector{})
	ctx := context.Background()
	for _, tc := range []struct {
		typ  string
		mode allotv1.AddressMode
		want int64
	}{
		{"m5.large", allotv1.AddressMode_ADDRESS_MODE_SECONDARY_IP, 29},
		{"c5.xlarge", allotv1.AddressMode_ADDRESS_MODE_SECONDARY_IP, 58},
		{"m5.large", allotv1.AddressMode_ADDRESS_MODE_PREFIX, 110},
	} {
		resp, err := bc.GetMaxPods(ctx, &allotv1.GetMaxPodsRequest{InstanceType: tc.typ, Mode: tc.mode})
		if err != nil || resp.GetMaxPods() != tc.want || resp.GetFormula() == "" {
			t.Errorf("%s %v: %v, %v; want %d", tc.typ, tc.mode, resp, err, tc.want)
		}
	}
	if _, err := bc.GetMaxPods(ctx, &allotv1.GetMaxPodsRequest{InstanceType: "x1.nonesuch"}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown type: %v", err)
	}
	_, err := bc.GetMaxPods(ctx, &allotv1.GetMaxPodsRequest{InstanceType: "t2.medium", Mode: allotv1.AddressMode_ADDRESS_MODE_PREFIX})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("prefixes on Xen: %v, want InvalidArgument", err)
	}
}

// emptyClusterBudgets starts one broker with sel and no node, and returns
// ListSubnetBudgets once it lists want subnets (or after 20s).
func emptyClusterBudgets(t *testing.T, sc scenario.Scenario, sel subnets.Selector, want int) []*allotv1.SubnetBudget {
	t.Helper()
	bc := startEmpty(t, sc, sel)
	ctx := context.Background()
	var got []*allotv1.SubnetBudget
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := bc.ListSubnetBudgets(ctx, &allotv1.ListSubnetBudgetsRequest{})
		if err == nil {
			got = resp.GetBudgets()
			if len(got) >= want {
				// One more look: nothing beyond the selection turns up late.
				time.Sleep(200 * time.Millisecond)
				if resp, err = bc.ListSubnetBudgets(ctx, &allotv1.ListSubnetBudgetsRequest{}); err == nil {
					got = resp.GetBudgets()
				}
				break
			}
		}
	}
	return got
}

// startEmpty starts one broker with sel and no node on awssim running sc.
func startEmpty(t *testing.T, sc scenario.Scenario, sel subnets.Selector) allotv1.BudgetServiceClient {
	t.Helper()
	sim, err := awssim.Start(context.Background(), awssim.Config{Scenario: sc, TimeScale: 10, AdminAddr: "off", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	ten, err := clock.Scaled(10)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b, err := brokerd.New(ctx, brokerd.Config{
		Name: "one", Cluster: "test", Listen: "127.0.0.1:0",
		Etcd:  brokerd.EtcdConfig{Client: etcdembedtest.Start(t)},
		EC2:   brokerd.EC2Config{Endpoint: sim.EC2Endpoint()},
		Clock: ten, ElectionTTL: 2 * time.Second, PodSubnets: sel,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; b.Close() })
	conn, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return allotv1.NewBudgetServiceClient(conn)
}
