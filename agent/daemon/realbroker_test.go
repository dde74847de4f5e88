package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/allotnet/allot/agent/brokerlink/brokertest"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
	"github.com/allotnet/allot/agent/pool"
	"github.com/allotnet/allot/broker/brokerd"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// realBroker runs the broker in-process, assembled as allot-broker
// assembles it (brokerd), over the env's awssim: embedded etcd, the store,
// the engine calling awssim through the SDK, and the gRPC server; the
// reconciler stays off. It returns a NodeService client. opts adjust the
// engine's configuration.
func (e *env) realBroker(opts ...func(*executor.Config)) allotv1.NodeServiceClient {
	client, _ := e.realBrokerWith(nil, opts...)
	return client
}

// realBrokerWith is realBroker that also returns the broker's store, for a
// test to act as the leader's engine would (propose or withdraw a release),
// and dials with dial added to the client's options.
func (e *env) realBrokerWith(dial []grpc.DialOption, opts ...func(*executor.Config)) (allotv1.NodeServiceClient, *store.Store) {
	t := e.t
	t.Helper()
	ecfg := executor.Config{Interval: 100 * time.Millisecond}
	for _, o := range opts {
		o(&ecfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b, err := brokerd.New(ctx, brokerd.Config{
		Name: "agent-test", Cluster: "agent-test", Listen: "127.0.0.1:0",
		Etcd:         brokerd.EtcdConfig{Client: etcdembedtest.Start(t)},
		EC2:          brokerd.EC2Config{Endpoint: e.sim.EC2Endpoint(), BucketShare: 1},
		Engine:       ecfg,
		NoReconciler: true,
		Coalesce:     5 * time.Millisecond,
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
	conn, err := grpc.NewClient(b.Addr(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dial...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		<-done
		b.Close()
	})
	return allotv1.NewNodeServiceClient(conn), b.Store()
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

// Against the real broker, the agent's warm targets alone decide what the
// node gives back: it states its excess with its usage, the broker proposes
// releasing that much, and once the agent has acknowledged, the addresses
// leave EC2 and the pool; the pod keeps its address throughout.
func TestReleaseWithRealBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and the broker engine")
	}
	e := newEnv(t)
	client := e.realBroker(func(c *executor.Config) {
		c.ReleaseAfter, c.ReleaseMargin = 200*time.Millisecond, 1
	})
	cfg := e.config()
	cfg.Warm = pool.Targets{WarmIPs: 2}
	cfg.Cooldown = -1
	a, err := New(cfg, Deps{IMDS: e.imds, Network: hostnettest.NewRecorder(), Broker: client, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	brokertest.WaitFor(t, 30*time.Second, "agent ready", a.Ready)

	keep, err := a.Add(ctxT(t), podReq("c0", "web-0"))
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	for i := 1; i <= 8; i++ {
		if _, err := a.Add(ctxT(t), podReq(fmt.Sprintf("c%d", i), fmt.Sprintf("web-%d", i))); err != nil {
			t.Fatalf("ADD %d: %v", i, err)
		}
	}
	grown := a.Pool().Stats().Total
	for i := 1; i <= 8; i++ {
		if err := a.Del(ctxT(t), podReq(fmt.Sprintf("c%d", i), fmt.Sprintf("web-%d", i))); err != nil {
			t.Fatalf("DEL %d: %v", i, err)
		}
	}
	// 1 pod and a warm target of 2, a margin of 1: at most 3 free remain.
	brokertest.WaitFor(t, 30*time.Second, "excess given back", func() bool {
		s := a.Pool().Stats()
		return s.Total <= 1+2+1 && s.Releasing == 0
	})
	onNode := map[string]bool{}
	for _, x := range e.sim.World().AllNetworkInterfaces() {
		for _, ip := range x.SecondaryIPs {
			onNode[ip] = true
		}
	}
	if !onNode[keep.Address.Addr().String()] {
		t.Fatalf("the pod's address %s left EC2", keep.Address.Addr())
	}
	if got := a.Pool().Stats(); got.Assigned != 1 || len(onNode) > got.Total {
		t.Fatalf("pool %+v (grew to %d), EC2 holds %d addresses: want 1 assigned and EC2 no more than the pool", got, grown, len(onNode))
	}
	if al := a.Pool().Allocations(); len(al) != 1 || al[0].Addr != keep.Address.Addr() {
		t.Fatalf("allocations %+v, want only the pod's %s", al, keep.Address.Addr())
	}
}

// In prefix mode the registration asks for prefixes, the first warm demand
// is one prefix's worth, and the /28 the real broker delivers becomes 16
// pool addresses once IMDS shows it; a pod gets an address inside it.
func TestPrefixMode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and the broker engine")
	}
	e := newEnv(t)
	var mu sync.Mutex
	var sent []any
	record := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		mu.Lock()
		sent = append(sent, req)
		mu.Unlock()
		return invoke(ctx, method, req, reply, cc, opts...)
	}
	client, _ := e.realBrokerWith([]grpc.DialOption{grpc.WithUnaryInterceptor(record)})
	cfg := e.config()
	cfg.Mode = ModePrefix
	cfg.NodeName = "ip-10-0-0-5.ec2.internal"
	a := e.startOn(cfg, hostnettest.NewRecorder(), client)
	brokertest.WaitFor(t, 30*time.Second, "the prefix's addresses in the pool", func() bool {
		return a.Pool().Stats().Total == 16
	})
	var (
		mode     allotv1.AddressMode
		nodeName string
	)
	shortfall16 := false
	mu.Lock()
	for _, r := range sent {
		switch r := r.(type) {
		case *allotv1.RegisterRequest:
			mode, nodeName = r.GetMode(), r.GetNodeName()
		case *allotv1.SetDemandRequest:
			shortfall16 = shortfall16 || r.GetWarmShortfall() == 16
		}
	}
	mu.Unlock()
	if mode != allotv1.AddressMode_ADDRESS_MODE_PREFIX || nodeName != cfg.NodeName {
		t.Fatalf("registered mode %v, node name %q", mode, nodeName)
	}
	if !shortfall16 {
		t.Fatal("no demand for one prefix's worth was stated")
	}
	var prefixes []netip.Prefix
	for _, x := range e.sim.World().AllNetworkInterfaces() {
		for _, p := range x.Prefixes {
			prefixes = append(prefixes, netip.MustParsePrefix(p))
		}
	}
	if len(prefixes) != 1 {
		t.Fatalf("EC2 holds prefixes %v, want the one delivered", prefixes)
	}
	res := mustAdd(t, a, podReq("c1", "web-0"))
	if !prefixes[0].Contains(res.Address.Addr()) {
		t.Fatalf("address %v outside the delivered prefix %v", res.Address, prefixes[0])
	}
}
