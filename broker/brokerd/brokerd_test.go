package brokerd_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/broker/brokerd"
	"github.com/allotnet/allot/broker/clock"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
)

func TestConfigRefused(t *testing.T) {
	for name, cfg := range map[string]brokerd.Config{
		"no name":    {Cluster: "c", Etcd: brokerd.EtcdConfig{DataDir: t.TempDir()}},
		"no cluster": {Name: "a", Etcd: brokerd.EtcdConfig{DataDir: t.TempDir()}},
		"no etcd":    {Name: "a", Cluster: "c"},
		"bad share":  {Name: "a", Cluster: "c", Etcd: brokerd.EtcdConfig{DataDir: t.TempDir()}, EC2: brokerd.EC2Config{BucketShare: 2}},
	} {
		if b, err := brokerd.New(context.Background(), cfg); err == nil {
			b.Close()
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestRunLeadsAndServes: one replica serves gRPC (health SERVING), wins
// the election and runs an engine; when its context ends, Run returns and
// the replica no longer leads.
func TestRunLeadsAndServes(t *testing.T) {
	sim, err := awssim.Start(context.Background(), awssim.Config{Scenario: scenario.Scenario{
		VPCs: []scenario.VPC{{ID: "vpc-0123456789abcdef0", CIDRs: []string{"10.0.0.0/16"},
			Subnets: []scenario.Subnet{{ID: "subnet-0aaaaaaaaaaaaaaaa", Name: "a", CIDR: "10.0.0.0/20", AZ: "us-east-1a"}}}},
	}, TimeScale: 10, AdminAddr: "off", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	ten, err := clock.Scaled(10)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := brokerd.New(ctx, brokerd.Config{
		Name: "one", Cluster: "test", Listen: "127.0.0.1:0",
		Etcd:  brokerd.EtcdConfig{Client: etcdembedtest.Start(t)},
		EC2:   brokerd.EC2Config{Endpoint: sim.EC2Endpoint()},
		Clock: ten, ElectionTTL: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()

	conn, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING && b.Elector().IsLeader() && b.Engine() != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not serving and leading after 20s: health %v (%v), leader %v", resp, err, b.Elector().IsLeader())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
	if b.Elector().IsLeader() {
		t.Error("still leading after Run returned")
	}
}
