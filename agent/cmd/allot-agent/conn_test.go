package main

import (
	"context"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/broker/brokerd"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/internal/freeport"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// With several broker addresses, the connection reaches whichever answers.
func TestDialBrokerFallsBackToAnswering(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sim, err := awssim.Start(ctx, awssim.Config{
		Scenario: scenario.Scenario{Region: "us-east-1",
			VPCs: []scenario.VPC{{CIDRs: []string{"10.0.0.0/16"},
				Subnets: []scenario.Subnet{{Name: "a", CIDR: "10.0.0.0/20", AZ: "us-east-1a"}}}},
			Instances: []scenario.Instance{{Subnet: "a", Type: "m5.large"}}},
		AdminAddr: "off",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	live := startBroker(t, sim)

	// A port nobody listens on.
	dead, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}

	conn, err := dialBroker(config{brokers: []string{dead, live.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	inst := sim.World().Instances()[0]
	prim := inst.NetworkInterfaces[0]
	_, err = allotv1.NewNodeServiceClient(conn).Register(ctx, &allotv1.RegisterRequest{Node: &allotv1.NodeIdentity{
		InstanceId: inst.ID, InstanceType: inst.Type, AvailabilityZone: inst.AvailabilityZone, VpcId: inst.VPCID,
		SubnetId: inst.SubnetID, PrimaryEniId: prim.ID, PrimaryMac: prim.MAC, PrimaryIp: prim.PrivateIP,
		SecurityGroupIds: prim.SecurityGroups, VpcCidrs: []string{"10.0.0.0/16"},
	}})
	if err != nil {
		t.Fatalf("register through the address list: %v", err)
	}
	if _, err := live.Store().GetNode(ctx, inst.ID); err != nil {
		t.Fatalf("the answering broker has no record of the registration: %v", err)
	}
}

// startBroker runs a broker in-process, assembled as allot-broker assembles
// it, on embedded etcd and sim, until the test ends.
func startBroker(t *testing.T, sim *awssim.Sim) *brokerd.Broker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b, err := brokerd.New(ctx, brokerd.Config{
		Name: "conn-test", Cluster: "conn-test", Listen: "127.0.0.1:0",
		Etcd:         brokerd.EtcdConfig{Client: etcdembedtest.Start(t)},
		EC2:          brokerd.EC2Config{Endpoint: sim.EC2Endpoint(), BucketShare: 1},
		NoReconciler: true,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		b.Close()
	})
	return b
}
