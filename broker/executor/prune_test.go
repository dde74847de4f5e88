package executor_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
)

// stuckPrune is the store with its pruning calls held until released, as
// on an etcd busy with a burst's writes: each waits for release or for its
// context to end, as a call to etcd would.
type stuckPrune struct {
	executor.Store
	release chan struct{}
	entered chan struct{} // receives when a pruning call starts
	mu      sync.Mutex
	inside  int // pruning calls under way
	most    int // the most under way at once
	ended   atomic.Int64
}

func (s *stuckPrune) hold(ctx context.Context) error {
	s.mu.Lock()
	s.inside++
	s.most = max(s.most, s.inside)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inside--
		s.mu.Unlock()
		s.ended.Add(1)
	}()
	select {
	case s.entered <- struct{}{}:
	default:
	}
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *stuckPrune) PruneIntents(ctx context.Context, olderThan time.Time) (int, error) {
	if err := s.hold(ctx); err != nil {
		return 0, err
	}
	return s.Store.PruneIntents(ctx, olderThan)
}

func (s *stuckPrune) DeleteIntents(ctx context.Context, old []store.Intent) (int, error) {
	if err := s.hold(ctx); err != nil {
		return 0, err
	}
	return s.Store.DeleteIntents(ctx, old)
}

func (s *stuckPrune) PruneReleases(ctx context.Context, olderThan time.Time) (int, error) {
	if err := s.hold(ctx); err != nil {
		return 0, err
	}
	return s.Store.PruneReleases(ctx, olderThan)
}

// TestSlowPruneHoldsNoRound: the engine prunes finished intents and
// releases at the start of a term and every retain/10 after. With the
// prune held (an etcd slow to delete a burst's intents), rounds still run
// and a node's demand is planned and met; the term ends while the prune
// is still held, and Run returns without waiting for it to be released.
func TestSlowPruneHoldsNoRound(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 1})
	inst := e.insts[0]
	sp := &stuckPrune{Store: e.st, release: make(chan struct{}), entered: make(chan struct{}, 1)}
	cfg := executor.Config{Store: sp}
	cfg.Cluster, cfg.EC2, cfg.Logger = cluster, e.ec2, quiet()
	cfg.Interval, cfg.FailureBackoff = 100*time.Millisecond, 100*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	eng := executor.New(cfg)
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()

	select {
	case <-sp.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the term's first prune did not start")
	}
	before := eng.Stats().Rounds
	e.register(t, inst, 6, 0, nil)
	waitFor(t, "demand met while the prune is held", 20*time.Second, func() (bool, error) {
		return e.satisfied(ctxT(t), map[string]int{inst.ID: 6})
	})
	if after := eng.Stats().Rounds; after <= before {
		t.Errorf("rounds %d before the demand and %d after it: no round ran while the prune was held", before, after)
	}
	sp.mu.Lock()
	inside, most := sp.inside, sp.most
	sp.mu.Unlock()
	if inside != 1 || most != 1 {
		t.Errorf("pruning calls under way %d, at most %d at once; want the one held", inside, most)
	}

	// The term ends with the prune still held: Run returns, and the
	// prune's call ends with the term's context.
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return while its prune was held")
	}
	if sp.ended.Load() != 1 {
		t.Errorf("%d pruning calls ended by the time Run returned, want the held one", sp.ended.Load())
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.inside != 0 {
		t.Errorf("%d pruning calls still under way after Run returned", sp.inside)
	}
}
