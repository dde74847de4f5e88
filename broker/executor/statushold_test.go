package executor

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/store"
)

// statusRecords is a NodeStatus that keeps its records in memory and
// counts the writes.
type statusRecords struct {
	recs         map[string]store.NodeStatus
	puts, clears int
}

func (s *statusRecords) PutNodeStatus(_ context.Context, st store.NodeStatus) error {
	s.puts++
	s.recs[st.InstanceID] = st
	return nil
}

func (s *statusRecords) ClearNodeStatus(_ context.Context, id string) error {
	s.clears++
	delete(s.recs, id)
	return nil
}

func (s *statusRecords) ListNodeStatus(context.Context) (map[string]store.NodeStatus, error) {
	out := map[string]store.NodeStatus{}
	for k, v := range s.recs {
		out[k] = v
	}
	return out, nil
}

// TestStatusHold: a reason that comes and goes within the hold is never
// written (nor cleared); one that holds is written once, and cleared at
// once when it goes.
func TestStatusHold(t *testing.T) {
	ctx := context.Background()
	ss := &statusRecords{recs: map[string]store.NodeStatus{}}
	u := newUnmetBook(slog.New(slog.DiscardHandler), 5*time.Second)
	u.startRun()
	full := &reasoned{store.UnmetNodeFull, errors.New("node i-1 is full")}
	t0 := time.Unix(1000, 0)
	round := func(at time.Duration, err error) {
		u.set("i-1", err)
		u.publish(ctx, ss, []string{"i-1"}, t0.Add(at), func(err error) { t.Fatal(err) })
	}
	// Full for 4s, then not: the flap a burst makes on every node.
	for at := time.Duration(0); at < 4*time.Second; at += time.Second {
		round(at, full)
	}
	round(4*time.Second, nil)
	if ss.puts != 0 || ss.clears != 0 {
		t.Fatalf("a 4s shortfall wrote %d statuses and %d clears, want none", ss.puts, ss.clears)
	}
	// Full again, for good: published once the hold is over, once.
	for at := 5 * time.Second; at <= 15*time.Second; at += time.Second {
		round(at, full)
		if want := at >= 10*time.Second; (ss.recs["i-1"].Reason == store.UnmetNodeFull) != want {
			t.Fatalf("at %s published = %v, want %v", at, !want, want)
		}
	}
	if ss.puts != 1 {
		t.Fatalf("%d writes of a lasting reason, want 1", ss.puts)
	}
	// Not full: cleared at once.
	round(16*time.Second, nil)
	if _, ok := ss.recs["i-1"]; ok || ss.clears != 1 {
		t.Fatalf("not cleared at once (%d clears)", ss.clears)
	}
	// A transient reason between two full ones restarts the hold.
	round(20*time.Second, full)
	round(23*time.Second, errors.New("an ENI is being attached"))
	round(26*time.Second, full)
	if ss.puts != 1 {
		t.Fatalf("published after %d puts: the hold was not restarted", ss.puts)
	}
}
