package brokerd_test

import (
	"context"
	"slices"
	"testing"
	"time"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// TestPodNetworkSubnetTags: a pod network that names a subnet tag gets the
// tagged subnets recorded by the leader's discovery (and their budgets
// listed before any node is in them); a subnet tagged afterwards is found
// by a later pass. Untagged subnets are not taken, nor tagged ones outside
// the VPC of the subnets the network names.
func TestPodNetworkSubnetTags(t *testing.T) {
	sim, conn := startPodNetBroker(t, podNetScenario())
	if err := sim.World().CreateTags([]string{pnA1, pnOtherA1}, map[string]string{"allot/pods": "blue"}); err != nil {
		t.Fatal(err)
	}
	pc := allotv1.NewPodNetworkServiceClient(conn)
	bc := allotv1.NewBudgetServiceClient(conn)
	ctx := context.Background()
	_, err := pc.SetPodNetwork(ctx, &allotv1.SetPodNetworkRequest{Network: &allotv1.PodNetwork{
		Name: "blue", Selector: &allotv1.NodeSelector{AvailabilityZone: "us-east-1a"},
		SubnetIds: []string{pnA1}, SubnetTags: map[string]string{"allot/pods": "blue"},
	}})
	if err != nil {
		t.Fatalf("set a pod network by tag: %v", err)
	}
	waitDiscovered(t, pc, bc, []string{pnA1})
	if err := sim.World().CreateTags([]string{pnA2}, map[string]string{"allot/pods": "blue"}); err != nil {
		t.Fatal(err)
	}
	waitDiscovered(t, pc, bc, []string{pnA1, pnA2})
}

// waitDiscovered waits (up to 30s) until pod network "blue" lists exactly
// want as discovered and every one of them has a budget.
func waitDiscovered(t *testing.T, pc allotv1.PodNetworkServiceClient, bc allotv1.BudgetServiceClient, want []string) {
	t.Helper()
	ctx := context.Background()
	var got, listed []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		pn, err := pc.GetPodNetwork(ctx, &allotv1.GetPodNetworkRequest{Name: "blue"})
		if err != nil {
			t.Fatal(err)
		}
		got = pn.GetDiscoveredSubnetIds()
		budgets, err := bc.ListSubnetBudgets(ctx, &allotv1.ListSubnetBudgetsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		listed = listed[:0]
		for _, b := range budgets.GetBudgets() {
			listed = append(listed, b.GetSubnetId())
		}
		all := true
		for _, id := range want {
			all = all && slices.Contains(listed, id)
		}
		if slices.Equal(got, want) && all {
			return
		}
	}
	t.Fatalf("discovered %v with budgets for %v; want %v discovered and budgeted", got, listed, want)
}
