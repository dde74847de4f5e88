package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestWatchNodeSendsUnmetStatus: over real gRPC, with the real engine
// against awssim, a node whose subnet has no budget left receives a
// NodeEvent whose unmet status names the subnet, its limit and its use,
// along with the instance limits the engine learned.
func TestWatchNodeSendsUnmetStatus(t *testing.T) {
	sc := scenario.Scenario{
		VPCs: []scenario.VPC{{
			ID: "vpc-0e2e0000000000001", CIDRs: []string{"10.0.0.0/16"},
			Subnets: []scenario.Subnet{{ID: e2eSubnet, Name: "a", CIDR: "10.0.0.0/22", AZ: "us-east-1a"}},
		}},
		Instances: []scenario.Instance{{Subnet: "a", Type: "m5.large", Count: 1}},
	}
	sim, err := awssim.Start(context.Background(), awssim.Config{Scenario: sc, TimeScale: e2eScale, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	b := startBroker(t, sim)
	conn, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	a := &agent{inst: sim.World().Instances()[0], node: allotv1.NewNodeServiceClient(conn)}
	id := a.inst.ID
	if _, err := a.node.Register(ctx, &allotv1.RegisterRequest{Node: a.identity(),
		Mode: allotv1.AddressMode_ADDRESS_MODE_SECONDARY_IP}); err != nil {
		t.Fatal(err)
	}
	// Keep the whole subnet for others once the engine has recorded it.
	for {
		sn, err := b.st.GetSubnet(ctx, e2eSubnet)
		if err == nil {
			if _, err := b.st.SetSubnetBudget(ctx, e2eSubnet, sn.Usable, 0); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !errors.Is(err, rpcerr.ErrNotFound) {
			t.Fatal(err)
		}
		// The engine records a subnet when a node with demand needs it.
		if _, err := a.node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: id, Pending: 4}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("the engine never recorded the node's subnet")
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, err := a.node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: id, Pending: 4}); err != nil {
		t.Fatal(err)
	}
	watch, err := a.node.WatchNode(ctx, &allotv1.WatchNodeRequest{InstanceId: id})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := watch.Recv()
		if err != nil {
			t.Fatalf("watch ended before an unmet status arrived: %v", err)
		}
		u := ev.GetUnmet()
		if u.GetReason() != store.UnmetBudget {
			continue
		}
		for _, want := range []string{e2eSubnet, "limit 0", "in use"} {
			if !strings.Contains(u.GetMessage(), want) {
				t.Errorf("unmet message %q does not say %q", u.GetMessage(), want)
			}
		}
		if u.GetSinceUnixMs() == 0 {
			t.Error("unmet status without a since time")
		}
		if ev.GetMaxEnis() != 3 || ev.GetIpv4PerEni() != 10 {
			t.Errorf("event limits %d ENIs × %d addresses, want m5.large's 3 × 10", ev.GetMaxEnis(), ev.GetIpv4PerEni())
		}
		if !ev.GetReleaseStates() {
			t.Error("event does not say it lists release states")
		}
		return
	}
}
