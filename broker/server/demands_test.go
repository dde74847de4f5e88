package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// heldDemands is a PutDemands that holds its first call until released and
// records every call's demands; it refuses node "i-bad".
type heldDemands struct {
	mu      sync.Mutex
	calls   [][]store.Demand
	first   chan struct{}
	release chan struct{}
}

func (h *heldDemands) PutDemands(_ context.Context, ds []store.Demand) ([]error, error) {
	h.mu.Lock()
	h.calls = append(h.calls, ds)
	n := len(h.calls)
	h.mu.Unlock()
	if n == 1 {
		close(h.first)
		<-h.release
	}
	errs := make([]error, len(ds))
	for i, d := range ds {
		if d.InstanceID == "i-bad" {
			errs[i] = fmt.Errorf("node %s is not registered: %w", d.InstanceID, rpcerr.ErrNotFound)
		}
	}
	return errs, nil
}

// Statements that arrive while a write is in flight go together in the
// next one, each with its own outcome; one whose caller gave up is left
// out.
func TestDemandsWaitingShareTheNextWrite(t *testing.T) {
	h := &heldDemands{first: make(chan struct{}), release: make(chan struct{})}
	w := &demandWriter{st: h}
	ctx := context.Background()
	results := make(chan error, 16)
	go func() { results <- w.put(ctx, store.Demand{InstanceID: "i-0", Pending: 1}) }()
	<-h.first
	gone, cancel := context.WithCancel(ctx)
	goneErr := make(chan error, 1)
	go func() { goneErr <- w.put(gone, store.Demand{InstanceID: "i-gone"}) }()
	const more = 10
	for i := 1; i <= more; i++ {
		id := fmt.Sprintf("i-%d", i)
		if i == more {
			id = "i-bad"
		}
		go func() {
			err := w.put(ctx, store.Demand{InstanceID: id, Pending: i})
			if id == "i-bad" {
				if !errors.Is(err, rpcerr.ErrNotFound) {
					err = fmt.Errorf("i-bad: %v, want its own refusal", err)
				} else {
					err = nil
				}
			}
			results <- err
		}()
	}
	waitFor(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.waiting) == more+1
	})
	cancel()
	if err := <-goneErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("caller that gave up: %v", err)
	}
	close(h.release)
	for range more + 1 {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.calls) != 2 || len(h.calls[1]) != more {
		t.Fatalf("writes of %d demands: want 2, the second with the %d that waited (not the one given up)", len(h.calls), more)
	}
}

// Over a real etcd: many agents stating their demand at once are all
// stored, in fewer transactions than statements or as many at most.
func TestSetDemandConcurrent(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	const nodes = 40
	id := func(i int) string { return fmt.Sprintf("i-%08x", 0x10+i) }
	for i := range nodes {
		e.register(t, id(i), subnet1)
	}
	before := e.st.Writes()["PutDemand"]
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			if _, err := e.node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: id(i), Pending: int32(i + 1)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	ds, err := e.st.ListDemands(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range nodes {
		if d := ds[id(i)]; d.Pending != i+1 {
			t.Errorf("node %d: pending %d, want %d", i, d.Pending, i+1)
		}
	}
	if n := e.st.Writes()["PutDemand"] - before; n < 1 || n > nodes {
		t.Errorf("%d demand transactions for %d statements", n, nodes)
	}
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30s")
		}
		time.Sleep(time.Millisecond)
	}
}
