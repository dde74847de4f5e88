package dataplane

import (
	"errors"
	"maps"
	"slices"
	"sync"
)

// queue hands ENI IDs from the world's hooks to the worker. Hooks only mark
// an ENI as changed (never block, never touch the kernel); the worker reads
// the ENI's current state from the world and converges on it, so a burst of
// events for one ENI costs one pass and the order of marks does not matter.
type queue struct {
	mu      sync.Mutex
	pending map[string]bool
	world   World
	closed  bool
	// marked counts marks; applied is the count the worker has caught up
	// with. Sync waits for applied to reach the count it saw.
	marked, applied uint64
	errs            []error
	wake            chan struct{} // worker: something is pending
	progress        chan struct{} // closed (and replaced) when applied moves
}

func newQueue() *queue {
	return &queue{pending: map[string]bool{}, wake: make(chan struct{}, 1), progress: make(chan struct{})}
}

// mark records that ids changed.
func (q *queue) mark(ids ...string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	for _, id := range ids {
		q.pending[id] = true
	}
	q.marked++
	q.kick()
}

func (q *queue) kick() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// bind sets the world the worker reads. It fails on a second world.
func (q *queue) bind(w World) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.world != nil && q.world != w {
		return errors.New("dataplane is already bound to another world")
	}
	q.world = w
	q.kick()
	return nil
}

// take returns what is pending and the mark count it covers; nothing while
// no world is bound, since the worker could not read the ENIs.
func (q *queue) take() (w World, ids []string, upTo uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.world == nil {
		return nil, nil, 0
	}
	ids = slices.Sorted(maps.Keys(q.pending))
	clear(q.pending)
	return q.world, ids, q.marked
}

// done records a finished pass.
func (q *queue) done(upTo uint64, errs []error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.errs = append(q.errs, errs...)
	if upTo > q.applied {
		q.applied = upTo
	}
	close(q.progress)
	q.progress = make(chan struct{})
}

// state returns the counters, whether a world is bound, and a channel
// closed at the next progress.
func (q *queue) state() (marked, applied uint64, bound bool, progress <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.marked, q.applied, q.world != nil, q.progress
}

// takeErrs returns and forgets the errors of the passes so far.
func (q *queue) takeErrs() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	err := errors.Join(q.errs...)
	q.errs = nil
	return err
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}
