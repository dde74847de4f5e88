package daemon

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/allotnet/allot/agent/brokerlink/brokertest"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/server"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// realBroker runs the broker's pieces in-process over the env's awssim:
// embedded etcd, the store, the engine calling awssim through the SDK, and
// the gRPC server. It returns a NodeService client.
func (e *env) realBroker() allotv1.NodeServiceClient {
	t := e.t
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st, err := store.Open(etcdembedtest.Start(t), "agent-test")
	if err != nil {
		t.Fatal(err)
	}
	ec2c, err := ec2client.New(context.Background(), ec2client.Config{
		Region: "us-east-1", Endpoint: e.sim.EC2Endpoint(), Limiter: ratelimit.New(ratelimit.Config{Share: 1}), Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	engDone := make(chan struct{})
	go func() {
		defer close(engDone)
		_ = executor.New(executor.Config{Cluster: "agent-test", Store: st, EC2: ec2c, Logger: log,
			Interval: 100 * time.Millisecond}).Run(ctx)
	}()
	srv, err := server.New(server.Config{Store: st, Logger: log, Coalesce: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		srv.Stop(sctx)
		cancel()
		<-engDone
	})
	return allotv1.NewNodeServiceClient(conn)
}

// Against the real broker (etcd, engine, awssim through the SDK), an agent
// starting empty gets its first pod an address, and the broker fills the
// warm pool; after a restart with the broker still there, nothing is freed.
func TestWithRealBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and the broker engine")
	}
	e := newEnv(t)
	e.sim.World().SetIMDSLag(50 * time.Millisecond) // IMDS lags; the agent must wait for it
	client := e.realBroker()
	cfg := e.config()
	a, err := New(cfg, Deps{IMDS: e.imds, Network: hostnettest.NewRecorder(), Broker: client, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stop := func() {
		cancel()
		<-done
	}
	brokertest.WaitFor(t, 30*time.Second, "agent ready", a.Ready)

	res, err := a.Add(ctxT(t), podReq("c1", "web-0"))
	if err != nil {
		t.Fatalf("first ADD against the real broker: %v", err)
	}
	eni := ""
	for _, x := range e.sim.World().AllNetworkInterfaces() {
		for _, ip := range x.SecondaryIPs {
			if ip == res.Address.Addr().String() {
				eni = x.ID
			}
		}
	}
	if eni != res.ENIID {
		t.Fatalf("EC2 has %v on %q, the agent says %s", res.Address, eni, res.ENIID)
	}
	// Default warm target (one ENI's worth, 14 on c5.xlarge): the broker
	// keeps filling the pool beyond the one pod.
	brokertest.WaitFor(t, 30*time.Second, "warm pool filled by the broker", func() bool {
		return a.Pool().Stats().Available() >= 14
	})
	before := a.Pool().Snapshot()
	stop()

	// Restart on the same checkpoint, host wiring lost: the pod comes back
	// with its address, nothing is freed, and the broker's record agrees.
	net := hostnettest.NewRecorder()
	b, err := New(cfg, Deps{IMDS: e.imds, Network: net, Broker: client, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- b.Run(ctx2) }()
	defer func() {
		cancel2()
		<-done2
	}()
	brokertest.WaitFor(t, 30*time.Second, "restarted agent registered", func() bool {
		return b.Ready() && b.BrokerStatus().Connected && b.BrokerStatus().Revision > 0
	})
	if !sameJSON(t, before.Allocations, b.Pool().Snapshot().Allocations) {
		t.Fatal("allocations changed across a restart")
	}
	if got := b.Pool().Stats().Total; got < len(before.Addresses) {
		t.Fatalf("pool holds %d addresses after restart, had %d", got, len(before.Addresses))
	}
	if addr, ok := wired(net, podReq("c1", "web-0")); !ok || addr != res.Address.Addr() {
		t.Fatalf("pod not rewired after restart: %v %v", addr, ok)
	}
}
