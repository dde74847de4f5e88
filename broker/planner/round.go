package planner

import "container/heap"

// round hands out slots one at a time, largest deficit first (ties: the
// planning order), until every node has what it wants for the round or can
// take no more.
//
// It does so a level at a time instead of a slot at a time. The nodes
// whose deficit is the largest, D, get one slot each in planning order: a
// node that got its slot is then below D, so it can't come again before
// the others at D, and every node outside the level was below D already.
// That is exactly the order one slot at a time from a queue gives, at a
// constant cost per slot instead of a queue's logarithm: a burst's round
// hands out tens of thousands of slots, most of them to many nodes at
// the same level. After its turn each node joins the level of its new
// deficit, merged in planning order.
func (p *planning) round(states []*nodeState, urgent bool) {
	lv := levels{byDeficit: map[int][]*nodeState{}}
	for _, s := range states { // in planning order, so appending keeps it
		if s.blocked == 0 && s.granted < s.wantSlots(urgent) {
			d := s.deficit(urgent)
			if _, ok := lv.byDeficit[d]; !ok {
				heap.Push(&lv, d)
			}
			lv.byDeficit[d] = append(lv.byDeficit[d], s)
		}
	}
	for lv.Len() > 0 {
		d := heap.Pop(&lv).(int)
		level := lv.byDeficit[d]
		delete(lv.byDeficit, d)
		next := map[int][]*nodeState{}
		for _, s := range level {
			if p.grant(s, urgent) && s.granted < s.wantSlots(urgent) {
				nd := s.deficit(urgent)
				next[nd] = append(next[nd], s)
			}
		}
		for nd, ns := range next {
			lv.add(nd, ns)
		}
	}
}

// levels holds the nodes still in a round by deficit, each level in
// planning order, with a max-heap of the deficits that have a level.
type levels struct {
	byDeficit map[int][]*nodeState
	keys      []int
}

// add merges ns, in planning order, into level d.
func (l *levels) add(d int, ns []*nodeState) {
	cur, ok := l.byDeficit[d]
	if !ok {
		l.byDeficit[d] = ns
		heap.Push(l, d)
		return
	}
	merged := make([]*nodeState, 0, len(cur)+len(ns))
	i, j := 0, 0
	for i < len(cur) && j < len(ns) {
		if cur[i].rank < ns[j].rank {
			merged = append(merged, cur[i])
			i++
		} else {
			merged = append(merged, ns[j])
			j++
		}
	}
	merged = append(append(merged, cur[i:]...), ns[j:]...)
	l.byDeficit[d] = merged
}

func (l *levels) Len() int           { return len(l.keys) }
func (l *levels) Less(i, j int) bool { return l.keys[i] > l.keys[j] }
func (l *levels) Swap(i, j int)      { l.keys[i], l.keys[j] = l.keys[j], l.keys[i] }
func (l *levels) Push(x any)         { l.keys = append(l.keys, x.(int)) }
func (l *levels) Pop() any {
	n := len(l.keys)
	x := l.keys[n-1]
	l.keys = l.keys[:n-1]
	return x
}
