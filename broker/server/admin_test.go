package server

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestAdminNodesENIsAndStatus(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	prepare(t, e) // node1: 1 ENI of 9, 5 assigned, 4 warm, an assign in flight
	e.register(t, node2, subnet2)
	e.limits(t, node2, 4, 15)
	e.addENI(t, node2, subnet2, "eni-00000021", 1, addrs("10.0.2", 21, 2))

	nodes, err := e.admin.ListNodes(ctx, &allotv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Nodes) != 2 {
		t.Fatalf("nodes %v", nodes)
	}
	n1, n2 := nodes.Nodes[0], nodes.Nodes[1]
	if n1.InstanceId != node1 || n1.Enis != 1 || n1.MaxEnis != 3 || n1.Attached != 9 || n1.Assigned != 5 ||
		n1.Warm != 4 || !n1.OperationInProgress || n1.SubnetId != subnet1 || n1.InstanceType != "m5.large" {
		t.Fatalf("node1 %v", n1)
	}
	if n2.InstanceId != node2 || n2.Enis != 1 || n2.Attached != 2 || n2.Assigned != 0 || n2.OperationInProgress {
		t.Fatalf("node2 %v", n2)
	}

	enis, err := e.admin.ListENIs(ctx, &allotv1.ListENIsRequest{InstanceId: node2})
	if err != nil {
		t.Fatal(err)
	}
	if len(enis.Enis) != 1 || enis.Enis[0].InstanceId != node2 || enis.Enis[0].Status != store.ENIAttached ||
		enis.Enis[0].Eni.SubnetCidr != "10.0.2.0/26" || len(enis.Enis[0].Eni.Addresses) != 2 {
		t.Fatalf("enis of node2 %v", enis)
	}
	all, err := e.admin.ListENIs(ctx, &allotv1.ListENIsRequest{})
	if err != nil || len(all.Enis) != 2 {
		t.Fatalf("all enis %v, %v", all, err)
	}

	st, err := e.admin.GetStatus(ctx, &allotv1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader != "broker-a" || st.Nodes != 2 || st.MaxAddresses != 3*9+4*14 || st.Attached != 11 ||
		st.Assigned != 5 || st.NodesWithOperationInProgress != 1 || st.OpenIntents != 1 {
		t.Fatalf("status %v", st)
	}
}

func TestHealthFollowsEtcd(t *testing.T) {
	etcd := etcdembedtest.StartServer(t)
	cli, err := etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	st, err := store.Open(cli, "test")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, st)
	hc := healthpb.NewHealthClient(e.conn)

	waitHealth := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: allotv1.NodeService_ServiceDesc.ServiceName})
			cancel()
			if err == nil && resp.Status == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("health: %v, %v; want %v", resp, err, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitHealth(healthpb.HealthCheckResponse_SERVING)
	etcd.Close()
	waitHealth(healthpb.HealthCheckResponse_NOT_SERVING)
}

func TestReflectionAndHealthRegistered(t *testing.T) {
	st, err := store.Open(etcdembedtest.Start(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(context.Background())
	info := srv.GRPC().GetServiceInfo()
	for _, name := range []string{"grpc.reflection.v1.ServerReflection", "grpc.health.v1.Health",
		"allot.v1.NodeService", "allot.v1.BudgetService", "allot.v1.AdminService"} {
		if _, ok := info[name]; !ok {
			t.Errorf("service %s not registered", name)
		}
	}
}
