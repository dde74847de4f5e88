package executor_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/awssim/throttle"
	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/store"
)

// timeScale runs awssim and our token buckets alike 20x faster than real
// time, so a 10 s refill wait takes half a second and every ratio holds.
const timeScale = 20

// share is the part of each EC2 bucket the engine's client may use: all
// of it; ratelimit keeps one token of slack for network jitter.
const share = 1.0

const (
	cluster  = "test"
	subnetID = "subnet-0aaaaaaaaaaaaaaaa"
)

// env is one test's world: awssim (throttling on) reached through the real
// SDK, an embedded etcd, and the store on it.
type env struct {
	sim   *awssim.Sim
	st    *store.Store
	ec2   *ec2client.Client
	lim   *ratelimit.Limiter
	insts []world.Instance
}

type envOpts struct {
	nodes        int
	instanceType string
	consistency  time.Duration
	// share, when set, replaces the engine's bucket share.
	share float64
	// scenario, when set, replaces the one-subnet world.
	scenario *scenario.Scenario
	// scale, when set, replaces timeScale for awssim and the limiter.
	scale float64
	// buckets, when set, replace EC2's buckets of these actions.
	buckets map[string]throttle.Spec
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	if o.instanceType == "" {
		o.instanceType = "m5.large"
	}
	sc := scenario.Scenario{
		VPCs: []scenario.VPC{{
			ID:    "vpc-0123456789abcdef0",
			CIDRs: []string{"10.0.0.0/16"},
			Subnets: []scenario.Subnet{
				{ID: subnetID, Name: "a", CIDR: "10.0.0.0/17", AZ: "us-east-1a"},
			},
		}},
		Instances: []scenario.Instance{{Subnet: "a", Type: o.instanceType, Count: o.nodes}},
		Throttle:  scenario.Throttle{Buckets: o.buckets},
	}
	if o.scale == 0 {
		o.scale = timeScale
	}
	if o.scenario != nil {
		sc = *o.scenario
	}
	sim, err := awssim.Start(context.Background(), awssim.Config{
		Scenario: sc, TimeScale: o.scale, AdminAddr: "off", Seed: 7, ConsistencyWindow: o.consistency,
	})
	if err != nil {
		t.Fatalf("start awssim: %v", err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	st, err := store.Open(etcdembedtest.Start(t), cluster)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	// A 2% share margin: with the whole of each bucket, the first burst's
	// requests race over fresh connections and one can reach awssim ahead of
	// an earlier one, finding EC2's bucket a token short (see report).
	sh := share
	if o.share > 0 {
		sh = o.share
	}
	lim := ratelimit.New(ratelimit.Config{Share: sh, TimeScale: o.scale, Adapt: true})
	ec, err := ec2client.New(context.Background(), ec2client.Config{
		Region: "us-east-1", Endpoint: sim.EC2Endpoint(), Limiter: lim, Logger: quiet(),
	})
	if err != nil {
		t.Fatalf("ec2 client: %v", err)
	}
	insts := sim.World().Instances()
	sort.Slice(insts, func(i, j int) bool { return insts[i].ID < insts[j].ID })
	return &env{sim: sim, st: st, ec2: ec, lim: lim, insts: insts}
}

func quiet() *slog.Logger {
	if testing.Verbose() && os.Getenv("ALLOT_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// register records a node as its agent would (identity from IMDS; limits
// left for the engine to describe) and states its demand.
func (e *env) register(t *testing.T, inst world.Instance, pending, warm int, f func(*store.Node)) store.Node {
	t.Helper()
	primary := inst.NetworkInterfaces[0]
	n := store.Node{
		InstanceID: inst.ID, InstanceType: inst.Type, AvailabilityZone: inst.AvailabilityZone,
		VPCID: inst.VPCID, SubnetID: inst.SubnetID, PrimaryENIID: primary.ID, PrimaryIP: inst.PrivateIP,
		SecurityGroups: primary.SecurityGroups, Mode: "secondary-ip",
	}
	if f != nil {
		f(&n)
	}
	n, err := e.st.PutNode(ctxT(t), n)
	if err != nil {
		t.Fatalf("register %s: %v", inst.ID, err)
	}
	e.demand(t, inst.ID, pending, warm)
	return n
}

func (e *env) demand(t *testing.T, id string, pending, warm int) {
	t.Helper()
	err := e.st.PutDemand(ctxT(t), store.Demand{InstanceID: id, Pending: pending, WarmShortfall: warm, UpdatedAt: time.Now()})
	if err != nil {
		t.Fatalf("demand of %s: %v", id, err)
	}
}

// running is an engine's Run in the background.
type running struct {
	eng    *executor.Engine
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error
}

func (e *env) start(t *testing.T, cfg executor.Config) *running {
	t.Helper()
	return e.startIn(t, context.Background(), cfg)
}

// startIn is start under ctx (which a test may cancel with a cause); the
// EC2 client is the env's unless cfg names one.
func (e *env) startIn(t *testing.T, ctx context.Context, cfg executor.Config) *running {
	t.Helper()
	cfg.Cluster, cfg.Store = cluster, e.st
	if cfg.EC2 == nil {
		cfg.EC2 = e.ec2
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	if cfg.Interval == 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	if cfg.FailureBackoff == 0 {
		cfg.FailureBackoff = 100 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &running{eng: executor.New(cfg), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = r.eng.Run(ctx)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop ends Run and returns its error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		return r.err
	case <-time.After(30 * time.Second):
		t.Fatalf("engine did not stop")
		return nil
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s (last error: %v)", timeout, what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// satisfied reports whether every node's attached ENIs in etcd hold at
// least want addresses and no intent is open.
func (e *env) satisfied(ctx context.Context, want map[string]int) (bool, error) {
	open, err := e.st.ListOpenIntents(ctx)
	if err != nil || len(open) > 0 {
		return false, fmt.Errorf("open intents: %d (%v)", len(open), err)
	}
	enis, err := e.st.ListENIs(ctx)
	if err != nil {
		return false, err
	}
	have := map[string]int{}
	for _, x := range enis {
		if x.Status == store.ENIAttached {
			have[x.InstanceID] += len(x.Addresses) + 16*len(x.Prefixes)
		}
	}
	for id, w := range want {
		if have[id] < w {
			return false, fmt.Errorf("%s has %d of %d", id, have[id], w)
		}
	}
	return true, nil
}

// ours returns the ENIs EC2 (awssim's world, the ground truth) holds with
// this cluster's tag.
func (e *env) ours() []*world.NetworkInterface {
	var out []*world.NetworkInterface
	for _, x := range e.sim.World().AllNetworkInterfaces() {
		if x.Tags[ec2client.TagCluster] == cluster {
			out = append(out, x)
		}
	}
	return out
}

// checkNoDuplicates fails if any address is on two ENIs in EC2.
func (e *env) checkNoDuplicates(t *testing.T) {
	t.Helper()
	seen := map[string]string{}
	for _, x := range e.sim.World().AllNetworkInterfaces() {
		for _, a := range append([]string{x.PrivateIP}, x.SecondaryIPs...) {
			if other, dup := seen[a]; dup {
				t.Errorf("address %s is on both %s and %s", a, other, x.ID)
			}
			seen[a] = x.ID
		}
	}
}

// checkAccounts fails unless the subnet's Attached equals the weight of
// the ENI records in it and nothing is reserved.
func (e *env) checkAccounts(t *testing.T) {
	t.Helper()
	ctx := ctxT(t)
	sn, err := e.st.GetSubnet(ctx, subnetID)
	if err != nil {
		t.Fatalf("get subnet: %v", err)
	}
	enis, err := e.st.ListENIs(ctx)
	if err != nil {
		t.Fatalf("list enis: %v", err)
	}
	var w int64
	for _, x := range enis {
		if x.SubnetID == subnetID {
			w += x.Weight()
		}
	}
	if sn.Attached != w || sn.Reserved != 0 {
		t.Errorf("subnet %s: attached %d reserved %d; ENI records weigh %d and nothing should be reserved", subnetID, sn.Attached, sn.Reserved, w)
	}
}

// checkMatchesEC2 fails unless every non-primary ENI record has exactly
// the addresses EC2 shows and EC2 shows no ENI of ours without a record.
func (e *env) checkMatchesEC2(t *testing.T) {
	t.Helper()
	enis, err := e.st.ListENIs(ctxT(t))
	if err != nil {
		t.Fatalf("list enis: %v", err)
	}
	recs := map[string]store.ENI{}
	for _, x := range enis {
		recs[x.ID] = x
	}
	for _, x := range e.ours() {
		rec, ok := recs[x.ID]
		if !ok {
			t.Errorf("ENI %s is in EC2 with our tags but has no record (a leak)", x.ID)
			continue
		}
		if !sameSet(rec.Addresses, x.SecondaryIPs) {
			t.Errorf("ENI %s: etcd has %v, EC2 has %v", x.ID, rec.Addresses, x.SecondaryIPs)
		}
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]bool{}
	for _, s := range a {
		m[s] = true
	}
	for _, s := range b {
		if !m[s] {
			return false
		}
	}
	return true
}
