package brokerlink

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/brokerlink/brokertest"
	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/identity"
	"github.com/allotnet/allot/agent/pool"
	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// fixture is one node: awssim, the fake broker, a pool, and a running link.
type fixture struct {
	t      *testing.T
	sim    *awssim.Sim
	inst   string
	imds   identity.MetadataAPI
	ident  identity.Identity
	broker *brokertest.Broker
	pool   *pool.Pool
	link   *Link
	// tweak, when set, adjusts the link configuration.
	tweak func(*Config)
	// held makes new links' arrivals hold every delivery as awaited.
	held bool
}

func newFixture(t *testing.T) *fixture { return newFixtureWith(t, nil) }

// newFixtureWith is newFixture with tweak applied to every link's
// configuration.
func newFixtureWith(t *testing.T, tweak func(*Config)) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sim, err := awssim.Start(ctx, awssim.Config{
		Scenario: scenario.Scenario{
			Region: "us-east-1",
			VPCs: []scenario.VPC{{CIDRs: []string{"10.0.0.0/16"},
				Subnets: []scenario.Subnet{{Name: "a", CIDR: "10.0.0.0/20", AZ: "us-east-1a"}}}},
			Instances: []scenario.Instance{{Subnet: "a", Type: "m5.large"}},
		},
		AdminAddr: "off", IMDSLag: -1, Seed: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	f := &fixture{t: t, sim: sim, inst: sim.World().Instances()[0].ID, broker: brokertest.Start(t, sim.World()),
		tweak: tweak}
	ep, err := sim.IMDSEndpoint(f.inst)
	if err != nil {
		t.Fatal(err)
	}
	if f.imds, err = identity.NewClient(ep); err != nil {
		t.Fatal(err)
	}
	if f.ident, err = identity.Fetch(ctx, f.imds); err != nil {
		t.Fatal(err)
	}
	if f.pool, err = pool.New(pool.Config{InstanceID: f.inst, Cooldown: -1}, checkpoint.State{}); err != nil {
		t.Fatal(err)
	}
	f.link = f.newLink()
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.link.Run(runCtx)
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	return f
}

func (f *fixture) newLink() *Link { return f.newLinkOn(f.pool) }

// newLinkOn returns a link (not running) over p.
func (f *fixture) newLinkOn(p *pool.Pool) *Link {
	f.t.Helper()
	cfg := Config{
		Identity: f.ident, Targets: pool.Targets{WarmIPs: 1}, Limits: pool.Limits{MaxENIs: 3, IPv4PerENI: 10},
		UsageInterval: 10 * time.Millisecond, BackoffMin: 10 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	}
	if f.tweak != nil {
		f.tweak(&cfg)
	}
	l, err := New(cfg, Deps{Client: f.broker.Client(), Pool: p, Arrivals: newTestArrivals(p, f.held)})
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

// deliver hands n addresses to the node and waits for the pool to hold them.
func (f *fixture) deliver(n int) []netip.Addr {
	f.t.Helper()
	brokertest.WaitFor(f.t, 10*time.Second, "registration", func() bool { return f.broker.Registration(f.inst) != nil })
	got, err := f.broker.Deliver(f.inst, n)
	if err != nil {
		f.t.Fatal(err)
	}
	brokertest.WaitFor(f.t, 10*time.Second, "delivery", func() bool { return f.pool.Stats().Total >= n })
	var out []netip.Addr
	for _, s := range got {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func key(cid string) pool.Key { return pool.Key{Network: "n", ContainerID: cid, IfName: "eth0"} }

// A snapshot older than one applied is ignored: it must not take back
// addresses a newer record delivered.
func TestStaleSnapshotIgnored(t *testing.T) {
	f := newFixture(t)
	f.deliver(2)
	l := f.link
	l.applyMu.Lock()
	defer l.applyMu.Unlock()
	rev := l.lastRev
	if k := l.Status().Known; k != 2 {
		t.Fatalf("known %d after delivering 2, want 2", k)
	}
	if l.applyLocked(nil, rev-1) {
		t.Fatal("stale snapshot applied")
	}
	if got := f.pool.Stats().Total; got != 2 {
		t.Fatalf("pool holds %d after a stale empty snapshot, want 2", got)
	}
	if k := l.Status().Known; k != 2 {
		t.Fatalf("known %d after a stale empty snapshot, want 2: the demand is not computed against it", k)
	}
	if !l.applyLocked(nil, rev+1) {
		t.Fatal("newer snapshot not applied")
	}
	if got := f.pool.Stats().Total; got != 0 {
		t.Fatalf("pool holds %d after a newer empty snapshot, want 0 (nothing assigned)", got)
	}
	if k := l.Status().Known; k != 0 {
		t.Fatalf("known %d after a newer empty snapshot, want 0", k)
	}
}

// After a restart, a proposal seen again (a stale view) that the broker had
// already answered — with nothing, since the pool set nothing aside for it —
// is answered WRONG_STATE; what the pool set aside this time comes back.
func TestAlreadyAnsweredReleaseReturnsAddresses(t *testing.T) {
	f := newFixture(t)
	got := f.deliver(2)
	for i := range got {
		if _, err := f.pool.Add(context.Background(), key(string(rune('a'+i))), pool.PodInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	id := f.broker.Propose(f.inst, []string{got[0].String(), got[1].String()})
	brokertest.WaitFor(t, 10*time.Second, "the empty answer", func() bool {
		ack, ok := f.broker.Ack(id)
		return ok && len(ack.GetAddresses()) == 0
	})
	if _, _, err := f.pool.Del(key("a")); err != nil {
		t.Fatal(err)
	}
	// A new process (nothing acknowledged in memory) sees the proposal in a
	// stale snapshot.
	l := f.newLink()
	l.applyMu.Lock()
	l.handleReleasesLocked(context.Background(), []*allotv1.ReleaseProposal{{ReleaseId: id,
		Addresses: []string{got[0].String(), got[1].String()}}}, false)
	l.applyMu.Unlock()
	if s := f.pool.Stats(); s.Releasing != 0 || s.Available() != 1 {
		t.Fatalf("pool after the refused second answer: %+v, want the freed address available, none releasing", s)
	}
}

func TestNetDemand(t *testing.T) {
	for _, tc := range []struct {
		d           pool.Demand
		unconfirmed int
		want        pool.Demand
	}{
		{pool.Demand{Pending: 3, WarmShortfall: 10}, 0, pool.Demand{Pending: 3, WarmShortfall: 10}},
		{pool.Demand{Pending: 3, WarmShortfall: 10}, 2, pool.Demand{Pending: 1, WarmShortfall: 10}},
		{pool.Demand{Pending: 3, WarmShortfall: 10}, 5, pool.Demand{Pending: 0, WarmShortfall: 8}},
		{pool.Demand{Pending: 0, WarmShortfall: 4}, 14, pool.Demand{}},
	} {
		if got := netDemand(tc.d, tc.unconfirmed); got != tc.want {
			t.Errorf("netDemand(%+v, %d) = %+v, want %+v", tc.d, tc.unconfirmed, got, tc.want)
		}
	}
}

// An unmet demand that doesn't change is not stated again: it carries
// known, so the broker counts what it delivered since without being told
// anew. Nothing is delivered here, so the shortfall stays as it is.
func TestUnchangedDemandNotRestated(t *testing.T) {
	f := newFixture(t)
	brokertest.WaitFor(t, 10*time.Second, "first demand", func() bool {
		d := f.broker.Demand(f.inst)
		return d != nil && d.GetWarmShortfall() > 0
	})
	first := f.broker.Calls("SetDemand")
	time.Sleep(50 * 10 * time.Millisecond) // fifty usage intervals
	if got := f.broker.Calls("SetDemand"); got != first {
		t.Errorf("%d SetDemand calls for an unchanged demand, want none", got-first)
	}
}
