package server

import (
	"context"
	"sync"

	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/internal/ctxjoin"
)

// demandWriter commits the agents' demand statements to etcd together.
// While one transaction is in flight, the statements that arrive wait and
// then go in the next, one transaction for all of them (up to
// store.MaxDemands): at a burst's start every agent states its demand
// within a moment, and one write each made etcd take hundreds of
// transactions, each read and fsynced alone, in the second the leader's
// first intents (reservations it must write before its first EC2 calls)
// queue behind them. Each statement is still written before its call is
// answered, and refused on its own (not registered, not valid).
type demandWriter struct {
	st interface {
		PutDemands(ctx context.Context, ds []store.Demand) ([]error, error)
	}

	mu       sync.Mutex
	waiting  []*queuedDemand
	draining bool
}

type queuedDemand struct {
	ctx  context.Context
	d    store.Demand
	err  error
	done chan struct{}
}

// put writes d with the next transaction and returns its outcome, or ctx's
// error if ctx ends first (the demand may then still be written, as a
// write cut off in flight may).
func (w *demandWriter) put(ctx context.Context, d store.Demand) error {
	q := &queuedDemand{ctx: ctx, d: d, done: make(chan struct{})}
	w.mu.Lock()
	w.waiting = append(w.waiting, q)
	start := !w.draining
	w.draining = true
	w.mu.Unlock()
	if start {
		go w.drain()
	}
	select {
	case <-q.done:
		return q.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drain writes what waits, a transaction at a time, until nothing does.
func (w *demandWriter) drain() {
	for {
		w.mu.Lock()
		batch := w.take()
		if len(batch) == 0 {
			w.draining = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		ds := make([]store.Demand, len(batch))
		ctxs := make([]context.Context, len(batch))
		for i, q := range batch {
			ds[i], ctxs[i] = q.d, q.ctx
		}
		// One agent giving up does not cut off the others' write.
		ctx, release := ctxjoin.WhileAny(context.Background(), ctxs)
		errs, err := w.st.PutDemands(ctx, ds)
		release()
		for i, q := range batch {
			q.err = err
			if i < len(errs) && errs[i] != nil {
				q.err = errs[i]
			}
			close(q.done)
		}
	}
}

// take removes and returns up to store.MaxDemands waiting statements whose
// callers still wait; w.mu is held.
func (w *demandWriter) take() []*queuedDemand {
	var batch []*queuedDemand
	n := 0
	for _, q := range w.waiting {
		switch {
		case q.ctx.Err() != nil:
			q.err = q.ctx.Err()
			close(q.done)
		case len(batch) < store.MaxDemands:
			batch = append(batch, q)
		default:
			w.waiting[n] = q
			n++
		}
	}
	clear(w.waiting[n:])
	w.waiting = w.waiting[:n]
	return batch
}
