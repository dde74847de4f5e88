package world

import (
	"container/heap"
	"time"
)

// event is a change scheduled for a simulated time, such as a detach
// completing.
type event struct {
	at    time.Time
	seq   uint64
	apply func(w *World, at time.Time)
}

// eventQueue is a min-heap by time, then by scheduling order.
type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	n := len(old)
	x := old[n-1]
	old[n-1] = nil
	*q = old[:n-1]
	return x
}

// scheduleLocked queues fn to run at at.
func (w *World) scheduleLocked(at time.Time, fn func(w *World, at time.Time)) {
	heap.Push(&w.events, &event{at: at, seq: w.nextSeqLocked(), apply: fn})
}
