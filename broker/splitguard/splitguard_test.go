package splitguard

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/reconciler"
)

// The guarded client stands in for the EC2 client wherever the leader uses
// one.
var (
	_ executor.EC2   = (*Client)(nil)
	_ reconciler.EC2 = (*Client)(nil)
)

const (
	subnet  = "subnet-0a000001"
	cluster = "prod"
)

func startSim(t *testing.T) *awssim.Sim {
	t.Helper()
	sim, err := awssim.Start(context.Background(), awssim.Config{TimeScale: 100, AdminAddr: "off", Seed: 1,
		Scenario: scenario.Scenario{Region: "us-east-1", VPCs: []scenario.VPC{{CIDRs: []string{"10.0.0.0/16"},
			Subnets: []scenario.Subnet{{ID: subnet, CIDR: "10.0.0.0/20", AZ: "us-east-1a"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	return sim
}

func ec2Of(t *testing.T, sim *awssim.Sim) *ec2client.Client {
	t.Helper()
	c, err := ec2client.New(context.Background(), ec2client.Config{Region: "us-east-1", Endpoint: sim.EC2Endpoint(),
		Limiter: ratelimit.New(ratelimit.Config{TimeScale: 1000}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clock is a settable Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type guard struct {
	*Client
	trips []error
}

func newGuard(t *testing.T, sim *awssim.Sim, storeID string, clk *clock) *guard {
	t.Helper()
	g := &guard{}
	c, err := New(Config{Cluster: cluster, StoreID: storeID, EC2: ec2Of(t, sim), Now: clk.now,
		OnTrip: func(err error) { g.trips = append(g.trips, err) }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	g.Client = c
	return g
}

func createInput() ec2client.CreateENIInput {
	return ec2client.CreateENIInput{SubnetID: subnet, SecondaryCount: 2,
		Tags: map[string]string{ec2client.TagCluster: cluster, ec2client.TagOwner: ec2client.OwnerValue}}
}

func mutatingCalls(sim *awssim.Sim) int64 {
	var n int64
	for action, c := range sim.Counters() {
		if !strings.HasPrefix(action, "Describe") {
			n += c.Calls
		}
	}
	return n
}

// TestSecondStateIsRefusedBeforeItsFirstCall: broker A (one state) has made
// an ENI; broker B, with a state of its own under the same cluster name,
// must refuse its very first mutating call without sending it, say why, and
// keep refusing; A goes on.
func TestSecondStateIsRefusedBeforeItsFirstCall(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t)
	clk := &clock{t: time.Unix(1e9, 0)}
	a := newGuard(t, sim, "st-a", clk)
	made, err := a.CreateENI(ctx, createInput())
	if err != nil {
		t.Fatal(err)
	}
	if got := sim.World().AllNetworkInterfaces(); len(got) != 1 || got[0].Tags[TagStoreID] != "st-a" {
		t.Fatalf("EC2 holds %+v: want one ENI tagged %s=st-a", got, TagStoreID)
	}

	b := newGuard(t, sim, "st-b", clk)
	before := mutatingCalls(sim)
	_, err = b.CreateENI(ctx, createInput())
	var fe *ForeignError
	if !errors.Is(err, ErrSplitBrain) || !errors.As(err, &fe) {
		t.Fatalf("B's CreateENI: %v, want a split-brain refusal", err)
	}
	if fe.ENI != made.ID || fe.Theirs != "st-a" || fe.Ours != "st-b" || fe.Count != 1 {
		t.Fatalf("refusal names %+v, want ENI %s of st-a", fe, made.ID)
	}
	for _, want := range []string{made.ID, "st-a", "st-b", "--etcd-initial-cluster"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if err := b.DeleteENI(ctx, made.ID); !errors.Is(err, ErrSplitBrain) {
		t.Fatalf("B's DeleteENI of A's ENI: %v, want refused", err)
	}
	if err := b.DetachENI(ctx, "eni-attach-x", true); !errors.Is(err, ErrSplitBrain) {
		t.Fatalf("B's DetachENI: %v, want refused", err)
	}
	if after := mutatingCalls(sim); after != before {
		t.Fatalf("B sent %d mutating calls after it found A's ENI, want none", after-before)
	}
	if len(b.trips) != 1 || b.Err() == nil {
		t.Fatalf("OnTrip called %d times, Err %v: want once, and the refusal kept", len(b.trips), b.Err())
	}
	// A is not disturbed: its own ENIs are its own.
	if _, err := a.AssignAddresses(ctx, made.ID, 1, false); err != nil {
		t.Fatalf("A's AssignAddresses: %v", err)
	}
	if len(a.trips) != 0 {
		t.Fatalf("A tripped on its own ENIs: %v", a.trips)
	}
}

// TestLookAgainAndInspectReads: B looked while EC2 held nothing of A's;
// within MaxAge it goes on, but A's ENI in any describe it reads trips it,
// and past MaxAge a mutating call looks again by itself.
func TestLookAgainAndInspectReads(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t)
	clk := &clock{t: time.Unix(1e9, 0)}
	b := newGuard(t, sim, "st-b", clk)
	if err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
	a := newGuard(t, sim, "st-a", clk)
	made, err := a.CreateENI(ctx, createInput())
	if err != nil {
		t.Fatal(err)
	}

	// Untagged ENIs of the cluster (made before the tag existed) are no
	// evidence.
	old := ec2Of(t, sim)
	if _, err := old.CreateENI(ctx, createInput()); err != nil {
		t.Fatal(err)
	}
	clk.add(DefaultMaxAge + time.Second)
	b2 := newGuard(t, sim, "st-b", clk)
	if err := b2.Check(ctx); !errors.Is(err, ErrSplitBrain) {
		t.Fatalf("a look with A's ENI present: %v, want refused", err)
	}

	// Passive: b looked before A's ENI existed; a describe shows it.
	clk.t = time.Unix(1e9, 0).Add(time.Second)
	if _, err := b.DescribeENIs(ctx, ec2client.DescribeENIsInput{IDs: []string{made.ID}}); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteENI(ctx, made.ID); !errors.Is(err, ErrSplitBrain) {
		t.Fatalf("after reading A's ENI, B's DeleteENI: %v, want refused", err)
	}

	// Past MaxAge, a mutating call looks again.
	c := newGuard(t, sim, "st-c", clk)
	c.lookAt = clk.now() // as if it had just looked, before A's ENI
	if _, err := c.AssignAddresses(ctx, made.ID, 0, false); errors.Is(err, ErrSplitBrain) {
		t.Fatalf("within MaxAge the guard looked again: %v", err)
	}
	clk.add(DefaultMaxAge)
	if _, err := c.AssignAddresses(ctx, made.ID, 1, false); !errors.Is(err, ErrSplitBrain) {
		t.Fatalf("past MaxAge: %v, want the new look to refuse", err)
	}
}

// reads are the ec2client methods that change nothing in EC2.
var reads = map[string]bool{
	"DescribeENIs": true, "DescribeSubnets": true, "DescribeInstanceTypes": true, "DescribeInstances": true,
	"FindSubnets": true, "Limiter": true, "Calls": true, "Throttled": true,
}

// TestEveryMethodIsClassified: a method ec2client gains must be either a
// read (listed above) or gated by a method of Client, or it would reach EC2
// through the embedded client unguarded.
func TestEveryMethodIsClassified(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	gated := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil {
				continue
			}
			if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "Client" {
					gated[fd.Name.Name] = true
				}
			}
		}
	}
	typ := reflect.TypeFor[*ec2client.Client]()
	for i := range typ.NumMethod() {
		name := typ.Method(i).Name
		if !reads[name] && !gated[name] {
			t.Errorf("ec2client.Client.%s is neither a known read nor gated by splitguard.Client", name)
		}
	}
}

func describeCalls(sim *awssim.Sim) int64 { return sim.Counters()["DescribeNetworkInterfaces"].Calls }

// TestWaitingCallsShareOneLook: mutating calls that reach a stale gate
// together (the engine's workers do) wait for one look and share it, rather
// than each describing every ENI of the cluster in turn.
func TestWaitingCallsShareOneLook(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t)
	clk := &clock{t: time.Unix(1e9, 0)}
	g := newGuard(t, sim, "st-a", clk)
	const callers = 8
	g.look.Lock() // a look in progress: every caller finds the gate stale and waits
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() { _ = g.DeleteENI(ctx, "eni-0000000000000dead") })
	}
	for waiting := 0; waiting < callers; {
		time.Sleep(time.Millisecond)
		waiting = waitingForLook()
	}
	before := describeCalls(sim)
	g.look.Unlock()
	wg.Wait()
	if n := describeCalls(sim) - before; n != 1 {
		t.Fatalf("%d calls waiting at a stale gate made %d describes of the cluster's ENIs, want 1", callers, n)
	}
}

// waitingForLook counts the goroutines blocked on a guard's look lock.
func waitingForLook() int {
	buf := make([]byte, 1<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "sync.(*Mutex).Lock") && strings.Contains(g, "splitguard.(*Client).") {
			n++
		}
	}
	return n
}

// TestReconcilerDescribeIsALook: a describe of every ENI with the
// cluster's and the owner's tags (the reconciler's) that shows nothing
// foreign counts as the gate's look; a narrower one does not, and one that
// shows a foreign ENI trips the guard.
func TestReconcilerDescribeIsALook(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t)
	clk := &clock{t: time.Unix(1e9, 0)}
	g := newGuard(t, sim, "st-a", clk)
	made, err := ec2Of(t, sim).CreateENI(ctx, createInput())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.DescribeENIs(ctx, ec2client.DescribeENIsInput{IDs: []string{made.ID}}); err != nil {
		t.Fatal(err)
	}
	before := describeCalls(sim)
	if _, err := g.AssignAddresses(ctx, made.ID, 1, false); err != nil {
		t.Fatal(err)
	}
	if n := describeCalls(sim) - before; n != 1 {
		t.Fatalf("after a describe by ID the gate described %d times, want a look of its own", n)
	}

	clk.add(DefaultMaxAge + time.Second)
	all := ec2client.DescribeENIsInput{Tags: map[string]string{ec2client.TagCluster: cluster, ec2client.TagOwner: ec2client.OwnerValue}}
	if _, err := g.DescribeENIs(ctx, all); err != nil {
		t.Fatal(err)
	}
	before = describeCalls(sim)
	if _, err := g.AssignAddresses(ctx, made.ID, 1, false); err != nil {
		t.Fatal(err)
	}
	if n := describeCalls(sim) - before; n != 0 {
		t.Fatalf("after the reconciler's describe of every ENI the gate described %d times, want 0", n)
	}

	// g's own ENI now carries st-a: to another state's guard the same
	// describe is no look but a refusal.
	if _, err := g.CreateENI(ctx, createInput()); err != nil {
		t.Fatal(err)
	}
	b := newGuard(t, sim, "st-b", clk)
	if _, err := b.DescribeENIs(ctx, all); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(b.Err(), ErrSplitBrain) || !b.lookAt.IsZero() {
		t.Fatalf("a describe showing st-a's ENI: guard error %v, look at %v; want tripped, no look", b.Err(), b.lookAt)
	}
}

// TestLongLookStaysFreshLonger: a look that took long (a large cluster's
// ENIs) stays fresh for ten times its own time when that is longer than
// MaxAge, so the gate does not spend most of the leader's time looking.
func TestLongLookStaysFreshLonger(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t)
	clk := &clock{t: time.Unix(1e9, 0)}
	g := newGuard(t, sim, "st-a", clk)
	// Every reading of the clock is 6 s later: the look takes 6 s.
	g.cfg.Now = func() time.Time { clk.add(6 * time.Second); return clk.now() }
	if err := g.Check(ctx); err != nil {
		t.Fatal(err)
	}
	g.cfg.Now = clk.now
	clk.add(DefaultMaxAge + time.Second)
	before := describeCalls(sim)
	if err := g.DeleteENI(ctx, "eni-0000000000000dead"); errors.Is(err, ErrSplitBrain) {
		t.Fatal(err)
	}
	if n := describeCalls(sim) - before; n != 0 {
		t.Errorf("%v after a 6 s look the gate looked again (%d describes); want it fresh for 60 s", DefaultMaxAge+time.Second, n)
	}
	clk.add(30 * time.Second)
	before = describeCalls(sim)
	_ = g.DeleteENI(ctx, "eni-0000000000000dead")
	if n := describeCalls(sim) - before; n != 1 {
		t.Errorf("past ten times the look's time the gate described %d times, want one new look", n)
	}
}
