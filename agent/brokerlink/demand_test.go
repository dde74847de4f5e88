package brokerlink

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/brokerlink/brokertest"
	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/pool"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// waitKnown waits for the broker's last demand of the node to carry known
// k (and the demand to satisfy cond, when given).
func (f *fixture) waitKnown(k int32, what string, cond func(*allotv1.SetDemandRequest) bool) *allotv1.SetDemandRequest {
	f.t.Helper()
	var d *allotv1.SetDemandRequest
	brokertest.WaitFor(f.t, 10*time.Second, what, func() bool {
		d = f.broker.Demand(f.inst)
		return d != nil && d.Known != nil && d.GetKnown() == k && (cond == nil || cond(d))
	})
	return d
}

// Every demand carries known: the address slots of the snapshot applied
// last, secondary addresses one each and /28 prefixes sixteen, over every
// ENI the broker lists.
func TestDemandCarriesKnown(t *testing.T) {
	f := newFixture(t)
	f.waitKnown(0, "the first demand, known 0", nil)

	f.deliver(3)
	f.waitKnown(3, "known 3 after 3 addresses", nil)
	if _, err := f.broker.DeliverPrefixes(f.inst, 1); err != nil {
		t.Fatal(err)
	}
	f.waitKnown(3+16, "known 19 after a /28 prefix", nil)
	if _, _, err := f.broker.AttachENI(f.inst, 2); err != nil {
		t.Fatal(err)
	}
	f.waitKnown(3+16+2, "known 21 after a second ENI with 2 addresses", nil)
	brokertest.WaitFor(t, 10*time.Second, "the pool to hold everything", func() bool {
		return f.pool.Stats().Total == 3+16+2
	})
	if k := f.link.Status().Known; k != 21 {
		t.Errorf("status known %d, want 21", k)
	}
}

// Known counts what a snapshot lists whether or not IMDS shows it yet, and
// only what the link took from it: exactly what the pool holds or
// Arrivals awaits, so the demand and known agree.
func TestKnownCountsAwaited(t *testing.T) {
	f := newFixture(t)
	f.waitKnown(0, "the first demand", nil)
	p, err := pool.New(pool.Config{InstanceID: f.inst, Cooldown: -1}, checkpoint.State{})
	if err != nil {
		t.Fatal(err)
	}
	f.held = true // the node sees nothing: everything stays awaited
	l := f.newLinkOn(p)
	prim, _ := f.ident.Primary()
	l.applyMu.Lock()
	l.applyLocked([]*allotv1.ENI{
		{EniId: prim.ENIID, Mac: prim.MAC, Primary: true,
			Addresses: []string{"10.0.0.50", "10.0.0.51", "not-an-address"},
			Prefixes:  []string{"10.0.1.0/28", "10.0.2.0/24"}},
		{EniId: "eni-0nomac", Addresses: []string{"10.0.0.60"}},
		{EniId: "eni-0new", Mac: "02:00:00:00:77:01", DeviceIndex: 1, Addresses: []string{"10.0.0.70"}},
	}, 1<<40)
	l.applyMu.Unlock()
	const want = 2 + 16 + 1
	if k := l.Status().Known; k != want {
		t.Fatalf("known %d, want %d (well-formed entries of ENIs with an ID and a MAC)", k, want)
	}
	if n := l.Status().Unconfirmed; n != want {
		t.Fatalf("arrivals await %d, want all %d known", n, want)
	}
	l.sendDemand(context.Background(), &reporter{registeredOK: true})
	f.waitKnown(want, "the demand to carry the awaited slots", nil)
}

// A change of known alone is stated: a delivery beyond the warm target
// leaves the demand at zero but moves known.
func TestKnownAloneResent(t *testing.T) {
	f := newFixture(t)
	f.deliver(1)
	met := func(d *allotv1.SetDemandRequest) bool { return d.GetPending() == 0 && d.GetWarmShortfall() == 0 }
	f.waitKnown(1, "the met demand with known 1", met)
	if _, err := f.broker.Deliver(f.inst, 2); err != nil {
		t.Fatal(err)
	}
	f.waitKnown(3, "the same met demand stated again with known 3", met)
}

// Changes within one DemandInterval coalesce: N ADDs starting to wait on an
// empty pool make at most two statements (the first change at once, the
// rest at the interval's end), the last with all N pending.
func TestDemandCoalesced(t *testing.T) {
	const interval = 500 * time.Millisecond
	f := newFixtureWith(t, func(c *Config) { c.DemandInterval = interval })
	f.waitKnown(0, "the first demand", nil)
	time.Sleep(interval + interval/5) // a quiet interval: the next change goes at once
	before := f.broker.Calls("SetDemand")

	const n = 20
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for i := range n {
		wg.Go(func() { _, _ = f.pool.Add(ctx, key(fmt.Sprint("c", i)), pool.PodInfo{}) })
	}
	brokertest.WaitFor(t, 10*time.Second, "all ADDs waiting", func() bool {
		return f.pool.Demand(f.link.cfg.Targets, f.link.Limits()).Pending == n
	})
	f.waitKnown(0, "the demand with every waiting ADD", func(d *allotv1.SetDemandRequest) bool { return d.GetPending() == n })
	if got := f.broker.Calls("SetDemand") - before; got < 1 || got > 2 {
		t.Fatalf("%d SetDemand calls for %d changes within one interval, want 1 or 2", got, n)
	}
}

// The pacing itself: the first change after a quiet interval is sent at
// once, later ones wait for the interval's end and go out as one call with
// the latest values, and an unchanged demand is not sent again.
func TestDemandPacing(t *testing.T) {
	const interval = 50 * time.Millisecond
	f := newFixtureWith(t, func(c *Config) { c.DemandInterval = interval })
	f.waitKnown(0, "the running link's first demand", nil)
	l := f.newLink() // not running: driven by hand below
	setKnown := func(k int) {
		l.mu.Lock()
		l.status.Known = k
		l.mu.Unlock()
	}
	ctx := context.Background()
	r := &reporter{registeredOK: true}
	due := time.NewTimer(time.Hour)
	due.Stop()
	defer due.Stop()
	calls := func() int { return f.broker.Calls("SetDemand") }
	base := calls()

	setKnown(4)
	l.demandChanged(ctx, r, due)
	if got := calls() - base; got != 1 || r.demandDue {
		t.Fatalf("first change: %d calls (due %v), want 1 at once", got, r.demandDue)
	}
	f.waitKnown(4, "known 4", nil)
	setKnown(5)
	l.demandChanged(ctx, r, due)
	setKnown(7)
	l.demandChanged(ctx, r, due)
	if got := calls() - base; got != 1 || !r.demandDue {
		t.Fatalf("changes within the interval: %d calls (due %v), want them held", got, r.demandDue)
	}
	select {
	case <-due.C:
	case <-time.After(10 * time.Second):
		t.Fatal("the interval's end never came")
	}
	r.demandDue = false
	l.sendDemand(ctx, r)
	if got := calls() - base; got != 2 {
		t.Fatalf("after the interval: %d calls, want 2", got)
	}
	f.waitKnown(7, "the latest known", nil)
	l.sendDemand(ctx, r)
	if got := calls() - base; got != 2 {
		t.Fatalf("unchanged demand sent again: %d calls, want 2", got)
	}

	time.Sleep(interval) // quiet again
	setKnown(8)
	l.demandChanged(ctx, r, due)
	if got := calls() - base; got != 3 || r.demandDue {
		t.Fatalf("first change after a quiet interval: %d calls (due %v), want 3, at once", got, r.demandDue)
	}
	f.waitKnown(8, "known 8", nil)
}
