package executor

import (
	"container/heap"
	"context"
	"sync"
)

// task is one unit of EC2 work for one node: a plan action, the upkeep of an
// ENI, a release, or the resolution of an intent left open.
type task struct {
	node   string
	kind   string
	urgent bool
	seq    uint64
	fn     func(ctx context.Context) error
	// trace is the traceparent of the demand the task answers, if any.
	trace string
}

// queue hands tasks to the workers, urgent ones (pods waiting now) first and
// otherwise in the order they were planned.
type queue struct {
	mu     sync.Mutex
	items  taskHeap
	seq    uint64
	signal chan struct{}
}

func newQueue() *queue { return &queue{signal: make(chan struct{}, 1)} }

func (q *queue) push(t *task) {
	q.mu.Lock()
	q.seq++
	t.seq = q.seq
	heap.Push(&q.items, t)
	q.mu.Unlock()
	q.nudge()
}

func (q *queue) nudge() {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// pop blocks until a task is ready or ctx ends.
func (q *queue) pop(ctx context.Context) (*task, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			t := heap.Pop(&q.items).(*task)
			more := len(q.items) > 0
			q.mu.Unlock()
			if more {
				q.nudge() // wake the next worker
			}
			return t, true
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, false
		case <-q.signal:
		}
	}
}

type taskHeap []*task

func (h taskHeap) Len() int { return len(h) }
func (h taskHeap) Less(i, j int) bool {
	if h[i].urgent != h[j].urgent {
		return h[i].urgent
	}
	return h[i].seq < h[j].seq
}
func (h taskHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *taskHeap) Push(x any)   { *h = append(*h, x.(*task)) }
func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}
