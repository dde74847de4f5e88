package executor

import (
	"context"
	"sync"

	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/internal/ctxjoin"
)

// applier commits store ops together (store.Store.Apply).
type applier interface {
	Apply(ctx context.Context, ops ...*store.Op) error
}

// batcher commits the engine's writes that change a subnet's counters in
// groups, per subnet. While one transaction for a subnet is in flight, the
// writes that arrive for it wait, and then commit together in the next
// (store.Apply): one etcd round trip, one fsync, for all of them, where
// one at a time each waited for every other's. Each op still decides on
// the records as the ops before it left them, so its checks are those it
// makes alone, and its refusal is its own.
type batcher struct {
	st applier

	mu     sync.Mutex
	queues map[string]*opQueue // by subnet; only while it has work
}

type opQueue struct {
	waiting []*queuedOp
}

type queuedOp struct {
	ctx  context.Context
	op   *store.Op
	err  error
	done chan struct{}
}

func newBatcher(st applier) *batcher {
	return &batcher{st: st, queues: map[string]*opQueue{}}
}

// do commits op with the next transaction of subnet's queue and returns
// its outcome (op.Err), or ctx's error if ctx ends first: the op may then
// still commit, as a write cut off in flight may.
func (b *batcher) do(ctx context.Context, subnet string, op *store.Op) error {
	if err := op.Err(); err != nil {
		return err // refused on its own fields: nothing to queue
	}
	q := &queuedOp{ctx: ctx, op: op, done: make(chan struct{})}
	b.mu.Lock()
	oq, busy := b.queues[subnet]
	if !busy {
		oq = &opQueue{}
		b.queues[subnet] = oq
	}
	oq.waiting = append(oq.waiting, q)
	b.mu.Unlock()
	if !busy {
		go b.drain(subnet, oq)
	}
	select {
	case <-q.done:
		return q.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drain commits oq's ops, a batch at a time, until none wait.
func (b *batcher) drain(subnet string, oq *opQueue) {
	for {
		b.mu.Lock()
		batch := oq.take()
		if len(batch) == 0 {
			delete(b.queues, subnet)
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		ops := make([]*store.Op, len(batch))
		for i, q := range batch {
			ops[i] = q.op
		}
		ctx, release := batchContext(batch)
		_ = b.st.Apply(ctx, ops...)
		release()
		for _, q := range batch {
			q.err = q.op.Err()
			close(q.done)
		}
	}
}

// take removes and returns the next batch: up to store.MaxBatch ops, in
// the order they came, that may share a transaction with the first
// (store.SameWriter). Ops whose context ended are dropped.
func (oq *opQueue) take() []*queuedOp {
	var batch, rest []*queuedOp
	for _, q := range oq.waiting {
		switch {
		case q.ctx.Err() != nil:
			q.err = q.ctx.Err()
			close(q.done)
		case len(batch) < store.MaxBatch && (len(batch) == 0 || store.SameWriter(batch[0].ctx, q.ctx)):
			batch = append(batch, q)
		default:
			rest = append(rest, q)
		}
	}
	oq.waiting = rest
	return batch
}

// batchContext returns a context with the values (fence, write mark) of
// the batch's first op that ends only once every op's context has ended:
// one caller giving up does not cut off its neighbours' writes.
func batchContext(batch []*queuedOp) (context.Context, func()) {
	ctxs := make([]context.Context, len(batch))
	for i, q := range batch {
		ctxs[i] = q.ctx
	}
	return ctxjoin.WhileAny(batch[0].ctx, ctxs)
}
