package executor

import (
	"math"
	"slices"
	"time"
)

// Stats are the engine's counters since New.
type Stats struct {
	// Rounds is how many times the engine looked at its state, and
	// RoundTime the wall time those rounds took (planning and starting
	// actions; the EC2 calls run in workers afterwards).
	Rounds    int64
	RoundTime time.Duration
	// RoundHist counts the rounds by how long each took: RoundHist[i]
	// those that took at most RoundBounds[i], the last those longer than
	// every bound. Two snapshots' difference gives a window's quantiles
	// (RoundQuantile).
	RoundHist []int64
	// FullReads is how many rounds read the whole state from etcd because
	// the followed view was not live or had not caught up in time.
	FullReads int64
	// Plans is how many non-empty plans it made.
	Plans int64
	// Planned counts the actions of those plans by kind ("create-attach",
	// "assign").
	Planned map[string]int64
	// Started, Done and Failed count tasks by kind ("create-attach",
	// "assign", "resume-attach", "unassign", "detach", "delete", "resolve").
	Started map[string]int64
	Done    map[string]int64
	Failed  map[string]int64
	// BudgetRefused counts intents the store refused for lack of budget.
	BudgetRefused int64
	// Resolved counts open intents found at start or later and closed by
	// describing EC2 (completed or failed).
	Resolved int64
	// Delivered is addresses added to nodes (secondary IPs, 16 per prefix).
	Delivered int64
	// Released is addresses given back to EC2 after an acknowledged release.
	Released int64
	// Proposed and Cancelled count release proposals.
	Proposed, Cancelled int64
}

func newStats() Stats {
	return Stats{
		Planned: map[string]int64{}, Started: map[string]int64{}, Done: map[string]int64{}, Failed: map[string]int64{},
		RoundHist: make([]int64, len(RoundBounds)+1),
	}
}

// RoundBounds are the upper bounds of RoundHist's buckets: ten per decade
// from 100µs to 10s, so a quantile read from them is within 26%.
var RoundBounds = func() []time.Duration {
	var b []time.Duration
	for k := 0; k <= 50; k++ {
		b = append(b, time.Duration(float64(100*time.Microsecond)*math.Pow(10, float64(k)/10)))
	}
	return b
}()

// observeRound counts one round that took d.
func (s *Stats) observeRound(d time.Duration) {
	s.Rounds++
	s.RoundTime += d
	i, _ := slices.BinarySearch(RoundBounds, d)
	s.RoundHist[i]++
}

// RoundQuantile returns the q-quantile (0 < q ≤ 1) of the rounds counted
// in hist (a RoundHist, or the difference of two) as its bucket's upper
// bound; 0 when hist counts none, and -1 when the quantile lies beyond the
// last bound.
func RoundQuantile(hist []int64, q float64) time.Duration {
	var total int64
	for _, n := range hist {
		total += n
	}
	if total == 0 {
		return 0
	}
	need := int64(math.Ceil(q * float64(total)))
	var seen int64
	for i, n := range hist {
		seen += n
		if seen >= need && i < len(RoundBounds) {
			return RoundBounds[i]
		}
	}
	return -1
}

func (s Stats) clone() Stats {
	c := s
	c.Planned, c.Started, c.Done, c.Failed = copyMap(s.Planned), copyMap(s.Started), copyMap(s.Done), copyMap(s.Failed)
	c.RoundHist = slices.Clone(s.RoundHist)
	return c
}

func copyMap(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Stats returns a copy of the counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats.clone()
}

func (e *Engine) count(f func(s *Stats)) {
	e.mu.Lock()
	f(&e.stats)
	e.mu.Unlock()
}
