package subnets_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/broker/clock"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/broker/subnets"
)

const (
	timeScale = 10
	cluster   = "test"
	vpcA      = "vpc-0aaaaaaaaaaaaaaa0"
	vpcB      = "vpc-0bbbbbbbbbbbbbbb0"
	nodesA    = "subnet-0a00000000000000a" // vpcA, us-east-1a: where the nodes are
	podsA     = "subnet-0a0000000000000a1" // vpcA, us-east-1a, cni=1
	podsB     = "subnet-0a0000000000000b1" // vpcA, us-east-1b, cni=1
	green     = "subnet-0a0000000000000c1" // vpcA, us-east-1a, team=green
	blue      = "subnet-0a0000000000000d1" // vpcA, us-east-1b, team=blue, cni=0
	spare     = "subnet-0a0000000000000e1" // vpcA, us-east-1a, untagged
	nodesB    = "subnet-0b00000000000000a" // vpcB, us-east-1a
	podsOther = "subnet-0b0000000000000a1" // vpcB, us-east-1a, cni=1
	unknown   = "subnet-0ffffffffffffffff" // not in EC2
)

var cni = map[string]string{"kubernetes.io/role/cni": "1"}

func testScenario() scenario.Scenario {
	return scenario.Scenario{VPCs: []scenario.VPC{
		{ID: vpcA, CIDRs: []string{"10.0.0.0/16", "100.64.0.0/16"}, Subnets: []scenario.Subnet{
			{ID: nodesA, Name: "nodes-a", CIDR: "10.0.0.0/20", AZ: "us-east-1a"},
			{ID: podsA, Name: "pods-a", CIDR: "100.64.0.0/20", AZ: "us-east-1a", Tags: cni},
			{ID: podsB, Name: "pods-b", CIDR: "100.64.16.0/20", AZ: "us-east-1b", Tags: cni},
			{ID: green, Name: "green", CIDR: "100.64.32.0/20", AZ: "us-east-1a", Tags: map[string]string{"team": "green"}},
			{ID: blue, Name: "blue", CIDR: "100.64.48.0/20", AZ: "us-east-1b",
				Tags: map[string]string{"team": "blue", "kubernetes.io/role/cni": "0"}},
			{ID: spare, Name: "spare", CIDR: "100.64.64.0/20", AZ: "us-east-1a"},
		}},
		{ID: vpcB, CIDRs: []string{"10.1.0.0/16", "100.65.0.0/16"}, Subnets: []scenario.Subnet{
			{ID: nodesB, Name: "nodes-b", CIDR: "10.1.0.0/20", AZ: "us-east-1a"},
			{ID: podsOther, Name: "pods-other", CIDR: "100.65.0.0/20", AZ: "us-east-1a", Tags: cni},
		}},
	}}
}

// env is one discoverer against awssim (through the real SDK client) and
// an embedded etcd, with what it asks of each counted.
type env struct {
	sim  *awssim.Sim
	st   *store.Store
	etcd *kvCounter
	logs *syncBuffer
	d    *subnets.Discoverer
}

func newEnv(t *testing.T, sel subnets.Selector) *env {
	t.Helper()
	sim, err := awssim.Start(context.Background(), awssim.Config{Scenario: testScenario(), TimeScale: timeScale, AdminAddr: "off", Seed: 1})
	if err != nil {
		t.Fatalf("start awssim: %v", err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	kv := &kvCounter{}
	srv := etcdembedtest.StartServer(t)
	cli, err := srv.Client(grpc.WithChainUnaryInterceptor(kv.intercept))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	st, err := store.Open(cli, cluster)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ec2client.New(context.Background(), ec2client.Config{
		Region: "us-east-1", Endpoint: sim.EC2Endpoint(), Logger: slog.New(slog.DiscardHandler),
		Limiter: ratelimit.New(ratelimit.Config{Share: 1, TimeScale: timeScale}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ten, err := clock.Scaled(timeScale)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	d := subnets.New(subnets.Config{Selector: sel, EC2: ec, Store: st, Clock: ten,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	return &env{sim: sim, st: st, etcd: kv, logs: logs, d: d}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// putNetworks stores the pod networks straight in etcd, as the admin's
// service would once it has checked them.
func (e *env) putNetworks(t *testing.T, pns []store.PodNetwork) {
	t.Helper()
	for _, pn := range pns {
		if _, err := e.st.PutPodNetwork(ctxT(t), pn, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// pass is what one Refresh cost.
type pass struct {
	describeSubnets int64 // EC2 DescribeSubnets calls (awssim's count)
	etcdRequests    int64 // etcd KV requests of any kind
	discoveryWrites int64 // SetDiscoveredSubnets transactions sent
	err             error
}

// refresh runs one Refresh and returns what it cost.
func (e *env) refresh(t *testing.T) pass {
	t.Helper()
	ec2Before := e.sim.Counters()["DescribeSubnets"].Calls
	kvBefore := e.etcd.n.Load()
	wBefore := e.st.Writes()["SetDiscoveredSubnets"]
	_, err := e.d.Refresh(ctxT(t))
	return pass{
		describeSubnets: int64(e.sim.Counters()["DescribeSubnets"].Calls - ec2Before),
		etcdRequests:    e.etcd.n.Load() - kvBefore,
		discoveryWrites: e.st.Writes()["SetDiscoveredSubnets"] - wBefore,
		err:             err,
	}
}

// discovered returns each stored pod network's discovered subnets and the
// etcd revision its record was last written at.
func (e *env) discovered(t *testing.T) (map[string][]string, map[string]int64) {
	t.Helper()
	pns, err := e.st.ListPodNetworks(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	ids, revs := map[string][]string{}, map[string]int64{}
	for _, pn := range pns {
		ids[pn.Name], revs[pn.Name] = pn.Discovered, pn.Rev
	}
	return ids, revs
}

// kvCounter counts the etcd KV requests (Range, Put, Txn…) a client sends.
type kvCounter struct{ n atomic.Int64 }

func (c *kvCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if strings.HasPrefix(method, "/etcdserverpb.KV/") {
		c.n.Add(1)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
