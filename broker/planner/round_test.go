package planner

import (
	"container/heap"
	"math/rand"
	"reflect"
	"testing"
)

// planWith runs MakeWith's steps with the given round.
func planWith(nodes []Node, budgets Budgets, opt Options, round func(*planning, []*nodeState, bool)) Plan {
	p, states := newPlanning(nodes, budgets)
	if opt.Policy == TimeOptimal && opt.Buckets.known() {
		chooseShapes(states, opt.Buckets)
		for _, s := range states {
			putNewFirst(s)
		}
	}
	round(p, states, true)
	round(p, states, false)
	p.fill(states)
	return p.result(states)
}

// TestRoundByLevelsMatchesQueue: on many random clusters (both modes mixed,
// short and plentiful budgets, both policies) the level-at-a-time round
// plans exactly what one slot at a time from a queue does: the same
// actions, in the same order, in the same subnets, and the same unmet
// demand.
func TestRoundByLevelsMatchesQueue(t *testing.T) {
	r := rand.New(rand.NewSource(20261127))
	buckets := Buckets{Assign: Bucket{Tokens: 20, Refill: 5}, Create: Bucket{Tokens: 3, Refill: 1},
		Attach: Bucket{Tokens: 3, Refill: 1}, Modify: Bucket{Tokens: 3, Refill: 1}}
	for i := range 400 {
		nodes, budgets := randomCluster(r, 1+r.Intn(60))
		if i%2 == 0 {
			for s := range budgets {
				budgets[s] = 1 << 20
			}
		}
		for _, opt := range []Options{{Policy: FewestCalls}, {Policy: TimeOptimal, Buckets: buckets}} {
			want := planWith(nodes, budgets, opt, (*planning).roundByQueue)
			got := planWith(nodes, budgets, opt, (*planning).round)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("cluster %d, %v: by levels\n%+v\nby queue\n%+v", i, opt.Policy, got, want)
			}
		}
	}
}

// roundByQueue is round as it was written first, one slot at a time from a
// max-heap of nodes by deficit: the reference round must match exactly.
func (p *planning) roundByQueue(states []*nodeState, urgent bool) {
	q := &deficitQueue{urgent: urgent}
	for _, s := range states {
		if s.blocked == 0 && s.granted < s.wantSlots(urgent) {
			q.items = append(q.items, s)
		}
	}
	heap.Init(q)
	for q.Len() > 0 {
		s := q.items[0]
		if !p.grant(s, urgent) || s.granted >= s.wantSlots(urgent) {
			heap.Pop(q)
			continue
		}
		heap.Fix(q, 0)
	}
}

// deficitQueue is a max-heap of nodes by remaining deficit in the round,
// ties broken by InstanceID then input position.
type deficitQueue struct {
	items  []*nodeState
	urgent bool
}

func (q *deficitQueue) Len() int { return len(q.items) }
func (q *deficitQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if da, db := a.deficit(q.urgent), b.deficit(q.urgent); da != db {
		return da > db
	}
	return a.less(b)
}
func (q *deficitQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *deficitQueue) Push(x any)    { q.items = append(q.items, x.(*nodeState)) }
func (q *deficitQueue) Pop() any {
	n := len(q.items)
	x := q.items[n-1]
	q.items = q.items[:n-1]
	return x
}
