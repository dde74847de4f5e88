package brokerd_test

import (
	"context"
	"slices"
	"strings"
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

const (
	pnVPC     = "vpc-0123456789abcdef0"
	pnOther   = "vpc-0fedcba9876543210"
	pnA1      = "subnet-0a1a1a1a1a1a1a1a1"
	pnA2      = "subnet-0a2a2a2a2a2a2a2a2"
	pnB1      = "subnet-0b1b1b1b1b1b1b1b1"
	pnOtherA1 = "subnet-0d1d1d1d1d1d1d1d1"
	pnNodeNet = "subnet-0e0e0e0e0e0e0e0e0"
)

func podNetScenario() scenario.Scenario {
	return scenario.Scenario{
		VPCs: []scenario.VPC{
			{ID: pnVPC, CIDRs: []string{"10.0.0.0/16", "100.64.0.0/16"}, SecurityGroups: []string{"sg-0123456789abcdef0"}, Subnets: []scenario.Subnet{
				{ID: pnNodeNet, Name: "nodes", CIDR: "10.0.0.0/24", AZ: "us-east-1a"},
				{ID: pnA1, Name: "pods-a1", CIDR: "100.64.0.0/20", AZ: "us-east-1a"},
				{ID: pnA2, Name: "pods-a2", CIDR: "100.64.16.0/20", AZ: "us-east-1a"},
				{ID: pnB1, Name: "pods-b1", CIDR: "100.64.32.0/20", AZ: "us-east-1b"},
			}},
			{ID: pnOther, CIDRs: []string{"10.1.0.0/16"}, Subnets: []scenario.Subnet{
				{ID: pnOtherA1, Name: "other", CIDR: "10.1.0.0/20", AZ: "us-east-1a"},
			}},
		},
		Instances: []scenario.Instance{{ID: "i-0aaaaaaaaaaaaaaa1", Subnet: pnNodeNet, Type: "m5.large",
			Tags: map[string]string{allotv1.NodeGroupTag: "workers"}}},
	}
}

// TestPodNetworkChecks: SetPodNetwork stores a network whose subnets
// exist, share a VPC and lie in the selector's zone, records those subnets
// so their budgets list at once, and refuses with InvalidArgument naming
// the subnet any network with a subnet in another zone, another VPC or
// none at all — before anything is stored and without a single
// CreateNetworkInterface.
func TestPodNetworkChecks(t *testing.T) {
	sim, conn := startPodNetBroker(t, podNetScenario())
	pc := allotv1.NewPodNetworkServiceClient(conn)
	ctx := context.Background()

	good := &allotv1.PodNetwork{Name: "pods-1a", Selector: &allotv1.NodeSelector{AvailabilityZone: "us-east-1a"},
		SubnetIds: []string{pnA1, pnA2}, SecurityGroupIds: []string{"sg-0123456789abcdef0"}}
	got, err := pc.SetPodNetwork(ctx, &allotv1.SetPodNetworkRequest{Network: good})
	if err != nil {
		t.Fatalf("set a sound pod network: %v", err)
	}
	if got.GetRevision() == 0 || !slices.Equal(got.GetSubnetIds(), good.SubnetIds) {
		t.Errorf("stored %v", got)
	}
	budgets, err := allotv1.NewBudgetServiceClient(conn).ListSubnetBudgets(ctx, &allotv1.ListSubnetBudgetsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, b := range budgets.GetBudgets() {
		listed = append(listed, b.GetSubnetId())
	}
	if !slices.Contains(listed, pnA1) || !slices.Contains(listed, pnA2) {
		t.Errorf("budgets list %v right after the set, want %s and %s", listed, pnA1, pnA2)
	}
	if _, err := pc.SetPodNetwork(ctx, &allotv1.SetPodNetworkRequest{Network: good, ExpectedRevision: -1}); status.Code(err) != codes.Aborted {
		t.Errorf("create over an existing network: %v, want Aborted", err)
	}

	for _, tc := range []struct {
		name string
		pn   *allotv1.PodNetwork
		want []string // in the message
	}{
		{"other zone", &allotv1.PodNetwork{Name: "bad-zone", Selector: &allotv1.NodeSelector{AvailabilityZone: "us-east-1a"},
			SubnetIds: []string{pnA1, pnB1}}, []string{pnB1, "us-east-1b"}},
		{"other vpc", &allotv1.PodNetwork{Name: "bad-vpc", Selector: &allotv1.NodeSelector{AvailabilityZone: "us-east-1a"},
			SubnetIds: []string{pnA1, pnOtherA1}}, []string{pnOtherA1, pnOther}},
		{"no such subnet", &allotv1.PodNetwork{Name: "bad-missing", SubnetIds: []string{"subnet-0999999999999999f"}},
			[]string{"subnet-0999999999999999f"}},
		{"bad group", &allotv1.PodNetwork{Name: "bad-sg", SubnetIds: []string{pnA1}, SecurityGroupIds: []string{"default"}},
			[]string{"security_group_ids"}},
	} {
		_, err := pc.SetPodNetwork(ctx, &allotv1.SetPodNetworkRequest{Network: tc.pn})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(status.Convert(err).Message(), w) {
				t.Errorf("%s: message %q does not name %s", tc.name, status.Convert(err).Message(), w)
			}
		}
		if _, err := pc.GetPodNetwork(ctx, &allotv1.GetPodNetworkRequest{Name: tc.pn.Name}); status.Code(err) != codes.NotFound {
			t.Errorf("%s: refused network was stored: %v", tc.name, err)
		}
	}
	if n := sim.Counters()["CreateNetworkInterface"].Calls; n != 0 {
		t.Errorf("CreateNetworkInterface calls = %d, want 0", n)
	}

	list, err := pc.ListPodNetworks(ctx, &allotv1.ListPodNetworksRequest{})
	if err != nil || len(list.GetNetworks()) != 1 || list.GetNetworks()[0].GetName() != "pods-1a" {
		t.Fatalf("list = %v, %v; want only pods-1a", list, err)
	}
	if _, err := pc.DeletePodNetwork(ctx, &allotv1.DeletePodNetworkRequest{Name: "pods-1a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.DeletePodNetwork(ctx, &allotv1.DeletePodNetworkRequest{Name: "pods-1a"}); status.Code(err) != codes.NotFound {
		t.Errorf("second delete: %v, want NotFound", err)
	}
}

// startPodNetBroker starts one broker with no node on awssim running sc
// and returns the sim and a connection to the broker.
func startPodNetBroker(t *testing.T, sc scenario.Scenario) (*awssim.Sim, *grpc.ClientConn) {
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
		Clock: ten, ElectionTTL: 2 * time.Second, PodSubnets: subnets.Selector{},
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
	return sim, conn
}
