package executor

import "time"

// Stats are the engine's counters since New.
type Stats struct {
	// Rounds is how many times the engine looked at its state, and
	// RoundTime the wall time those rounds took (planning and starting
	// actions; the EC2 calls run in workers afterwards).
	Rounds    int64
	RoundTime time.Duration
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
	return Stats{Planned: map[string]int64{}, Started: map[string]int64{}, Done: map[string]int64{}, Failed: map[string]int64{}}
}

func (s Stats) clone() Stats {
	c := s
	c.Planned, c.Started, c.Done, c.Failed = copyMap(s.Planned), copyMap(s.Started), copyMap(s.Done), copyMap(s.Failed)
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
