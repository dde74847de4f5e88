package brokerlink

import (
	"context"
	"testing"

	"github.com/allotnet/allot/agent/pool"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// With release states, the link asks the broker nothing about releases it
// set aside: one listed as acknowledged stays set aside, one listed in
// neither state is settled by a fresh read (its addresses, still on the
// node, come back to the pool).
func TestReleaseStatesSpareAcks(t *testing.T) {
	f := newFixture(t)
	got := f.deliver(3)
	for _, r := range []struct {
		id   string
		addr int
	}{{"rel-acked", 0}, {"rel-gone", 1}} {
		ack, err := f.pool.ProposeRelease(r.id, got[r.addr:r.addr+1], nil)
		if err != nil || len(ack.Addresses) != 1 {
			t.Fatalf("set aside %s: %+v, %v", r.id, ack, err)
		}
	}
	acks := f.broker.Calls("AckRelease")
	l := f.newLink() // a restarted process: nothing acknowledged in memory
	l.applyMu.Lock()
	l.handleReleasesLocked(context.Background(), []*allotv1.ReleaseProposal{{ReleaseId: "rel-acked",
		Addresses: []string{got[0].String()}, State: allotv1.ReleaseState_RELEASE_STATE_ACKED}}, true)
	l.applyMu.Unlock()
	if n := f.broker.Calls("AckRelease") - acks; n != 0 {
		t.Errorf("%d acknowledgements sent; the states said everything", n)
	}
	mine := l.releasing()
	if _, ok := mine["rel-acked"]; !ok || len(mine) != 1 {
		t.Fatalf("set aside after the event: %v, want rel-acked only", mine)
	}
	if s := f.pool.Stats(); s.Releasing != 1 || s.Available() != 2 {
		t.Fatalf("pool %+v: want 1 releasing, 2 available", s)
	}
}

// Limits come from the broker when none were configured, and never
// override configured ones; a broker that does not know them yet (zero)
// leaves them unknown.
func TestLimitsFromBroker(t *testing.T) {
	f := newFixture(t)
	l := f.newLink()
	l.learnLimits(3, 10)
	if got := l.Limits(); got != (pool.Limits{MaxENIs: 3, IPv4PerENI: 10}) {
		t.Fatalf("configured limits changed to %+v", got)
	}
	l.cfg.Limits = pool.Limits{}
	l.status.Limits = pool.Limits{}
	l.learnLimits(0, 0)
	if got := l.Limits(); got != (pool.Limits{}) {
		t.Fatalf("zero limits from the broker became %+v", got)
	}
	l.learnLimits(4, 15)
	if got := l.Limits(); got != (pool.Limits{MaxENIs: 4, IPv4PerENI: 15}) {
		t.Fatalf("limits %+v, want the broker's 4 × 15", got)
	}
}

// The unmet status of the stream is kept for Status and cleared by an
// event without one.
func TestUnmetInStatus(t *testing.T) {
	f := newFixture(t)
	l := f.newLink()
	l.setUnmet(&allotv1.UnmetStatus{Reason: "budget_exhausted", Message: "subnet subnet-1: budget exceeded: limit 0, in use 0, requested 3"})
	if s := l.Status(); s.UnmetReason != "budget_exhausted" || s.UnmetMessage == "" {
		t.Fatalf("status %+v", s)
	}
	l.setUnmet(nil)
	if s := l.Status(); s.UnmetReason != "" || s.UnmetMessage != "" {
		t.Fatalf("status after clearing %+v", s)
	}
}
