package brokerlink

import (
	"context"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/brokerlink/brokertest"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A broker that refuses calls as busy (codes.Unavailable) is asked again
// only after a backoff that doubles from BackoffMin up to BackoffMax, with
// jitter, and demand and usage both wait for it; a success ends it. A call
// the broker turns down for another reason is tried again at the next usage
// tick, as before. Driven by hand, with backoffs of hours, so that no step
// depends on how fast the machine is.
func TestBusyBrokerBackoff(t *testing.T) {
	f := newFixture(t)
	f.waitKnown(0, "the running link's first demand", nil)
	l := f.newLink() // not running: driven by hand below
	l.cfg.BackoffMin, l.cfg.BackoffMax = time.Hour, 3*time.Hour
	setKnown := func(k int) {
		l.mu.Lock()
		l.status.Known = k
		l.mu.Unlock()
	}
	ctx := context.Background()
	r := &reporter{registeredOK: true}
	demands := func() int { return f.broker.Calls("SetDemand") }
	usages := func() int { return f.broker.Calls("ReportUsage") }
	busy := status.Error(codes.Unavailable, "broker busy: 1024 agent calls in progress; retry with backoff")
	base, baseUsage := demands(), usages()

	f.broker.FailNext("SetDemand", 2, busy)
	setKnown(1)
	for i, want := range []time.Duration{time.Hour, 2 * time.Hour} {
		before := time.Now()
		l.sendDemand(ctx, r)
		if got := demands() - base; got != i+1 || r.demandSent {
			t.Fatalf("refusal %d: %d calls (sent %v), want %d, not sent", i+1, got, r.demandSent, i+1)
		}
		if r.backoff != want || r.retryAt.Before(before.Add(want/2)) || r.retryAt.After(time.Now().Add(want)) {
			t.Fatalf("refusal %d: backoff %v until %v, want %v with jitter from %v", i+1, r.backoff, r.retryAt, want, before)
		}
		l.sendDemand(ctx, r)
		l.sendUsage(ctx, r, false)
		if demands()-base != i+1 || usages() != baseUsage || r.demandSent {
			t.Fatalf("refusal %d: a call went out while backing off", i+1)
		}
		r.retryAt = time.Now() // the backoff is over
	}
	l.sendDemand(ctx, r)
	if got := demands() - base; got != 3 || !r.demandSent || r.backoff != 0 || !r.retryAt.IsZero() {
		t.Fatalf("after the backoff: %d calls (sent %v, backoff %v), want 3, sent, backoff ended", got, r.demandSent, r.backoff)
	}
	f.waitKnown(1, "known 1 once the broker took the demand", nil)

	// Capped at BackoffMax.
	r.backoff = 2 * time.Hour
	f.broker.FailNext("ReportUsage", 1, busy)
	l.sendUsage(ctx, r, true)
	if usages()-baseUsage != 1 || r.backoff != 3*time.Hour {
		t.Fatalf("usage refused: %d calls, backoff %v; want 1 call, backoff 3h", usages()-baseUsage, r.backoff)
	}
	r.succeeded()

	// Turned down for another reason: no backoff.
	f.broker.FailNext("SetDemand", 1, status.Error(codes.FailedPrecondition, "not now"))
	setKnown(2)
	l.sendDemand(ctx, r)
	if got := demands() - base; got != 4 || r.demandSent || r.waiting() {
		t.Fatalf("turned down: %d calls (sent %v, waiting %v), want 4, not sent, no backoff", got, r.demandSent, r.waiting())
	}
	l.sendDemand(ctx, r)
	if got := demands() - base; got != 5 || !r.demandSent {
		t.Fatalf("retried: %d calls (sent %v), want 5, sent", got, r.demandSent)
	}
	f.waitKnown(2, "known 2", nil)
}

// A demand call that waits for a slow broker does not hold back the
// node's heartbeats: they go out from a goroutine of their own, so the
// node is not taken for gone while its calls wait.
func TestHeartbeatsWhileDemandWaits(t *testing.T) {
	f := newFixtureWith(t, func(c *Config) { c.HeartbeatInterval = 10 * time.Millisecond })
	f.waitKnown(0, "the first demand", nil)
	entered, release := f.broker.Hold("SetDemand")
	defer release()
	f.deliver(2) // a new snapshot: the reporter states the demand again
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no demand call came to wait")
	}
	beats := f.broker.Calls("Heartbeat")
	brokertest.WaitFor(t, 10*time.Second, "three heartbeats while the demand call waits", func() bool {
		return f.broker.Calls("Heartbeat") >= beats+3
	})
	release()
	f.waitKnown(2, "the demand once the broker answers", nil)
}
