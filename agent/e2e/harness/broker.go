package harness

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/leader"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/server"
	"github.com/allotnet/allot/broker/store"
)

// Cluster is the broker's cluster name (etcd prefix, ENI tag).
const Cluster = "e2e"

// Broker is the broker in-process: embedded etcd, the store, an elector
// that runs the engine, and the gRPC server on 127.0.0.1.
type Broker struct {
	Store *store.Store
	// Addr is the gRPC address agents dial.
	Addr string
}

// StartBroker starts the broker against the cloud's EC2 endpoint through
// the real SDK, with its limiter and timers scaled like the simulation.
func StartBroker(t testing.TB, c *Cloud, log *slog.Logger) *Broker {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cli := etcdembedtest.Start(t)
	st, err := store.Open(cli, Cluster)
	if err != nil {
		t.Fatal(err)
	}
	ec2c, err := ec2client.New(context.Background(), ec2client.Config{
		Region: "us-east-1", Endpoint: c.Sim.EC2Endpoint(),
		Limiter: ratelimit.New(ratelimit.Config{Share: 0.5, TimeScale: c.TimeScale}), Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	el, err := leader.New(leader.Config{Client: cli, Prefix: st.Prefix(), Name: "broker-e2e", TTL: 5 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	elDone := make(chan struct{})
	go func() {
		defer close(elDone)
		_ = el.Run(ctx, func(ctx context.Context) error {
			return executor.New(executor.Config{
				Cluster: Cluster, Store: st, EC2: ec2c, Logger: log,
				Interval: 50 * time.Millisecond,
				// Releases of surplus addresses are not what these tests
				// are about; a long wait keeps the engine from proposing
				// them mid-test.
				ReleaseAfter:   time.Hour,
				ReleaseTimeout: time.Hour,
			}.WithTimeScale(c.TimeScale)).Run(ctx)
		})
	}()
	srv, err := server.New(server.Config{Store: st, Leader: el, Logger: log, Coalesce: 5 * time.Millisecond})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		srv.Stop(sctx)
		cancel()
		<-elDone
	})
	return &Broker{Store: st, Addr: lis.Addr().String()}
}

// Records is what the broker's etcd holds for the node's ENIs, by ENI ID.
func (b *Broker) Records(t testing.TB) map[string]ENIState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	enis, err := b.Store.ListNodeENIs(ctx, InstanceID)
	if err != nil {
		t.Fatalf("broker records: %v", err)
	}
	out := map[string]ENIState{}
	for _, e := range enis {
		out[e.ID] = ENIState{Status: e.Status, DeviceIndex: e.DeviceIndex,
			Addresses: sortedCopy(append(append([]string(nil), e.Addresses...), e.Prefixes...))}
	}
	return out
}
