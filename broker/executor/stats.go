package executor

import (
	"maps"
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
	// RoundPhases is where the rounds' wall time went, by phase (Phases
	// names them); SlowRounds counts the rounds longer than SlowRound and
	// SlowRoundPhases is where theirs went: what a long round is made of.
	RoundPhases     map[string]time.Duration
	SlowRounds      int64
	SlowRoundPhases map[string]time.Duration
	// RoundCPU is the processor time the rounds ran, RoundCPUHist counts
	// them by it (RoundBounds' buckets), and SlowRoundCPU is that of the
	// rounds longer than SlowRound. A round's wall time less its CPU time
	// is what it waited: for a core, for etcd, for the view. Zero unless
	// Config.RoundCPU is set, and zero where the thread's CPU clock cannot
	// be read (threadCPU).
	RoundCPU     time.Duration
	RoundCPUHist []int64
	SlowRoundCPU time.Duration
	// FullReads is how many rounds read the whole state from etcd because
	// the followed view was not live or had not caught up in time.
	FullReads int64
	// Behind is how many rounds planned nothing because the followed view
	// was live but had not reached the engine's latest write in time (see
	// Engine.current).
	Behind int64
	// Plans is how many non-empty plans it made.
	Plans int64
	// Planned counts the actions of those plans by kind ("create-attach",
	// "assign").
	Planned map[string]int64
	// Early counts the planned actions that went ahead of their demand's
	// gather, on tokens a full bucket would have lost.
	Early int64
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
		RoundHist: make([]int64, len(RoundBounds)+1), RoundCPUHist: make([]int64, len(RoundBounds)+1),
		RoundPhases: map[string]time.Duration{}, SlowRoundPhases: map[string]time.Duration{},
	}
}

// SlowRound is the round time past which a round's phases are counted in
// Stats.SlowRoundPhases: half the 100 ms a round at 5,000 nodes is held to.
const SlowRound = 50 * time.Millisecond

// The phases of a round, in order.
const (
	// phaseCatchUp is the wait for the followed view to reach the engine's
	// own latest write.
	phaseCatchUp = iota
	// phaseRead builds the snapshot (from the view, or a full read) and
	// reads the open intents.
	phaseRead
	// phaseDescribe describes from EC2 the nodes whose facts are missing.
	phaseDescribe
	// phaseUpkeep queues unfinished work and cancels stale releases.
	phaseUpkeep
	// phasePlan runs the planner and queues its actions.
	phasePlan
	// phaseRelease proposes releases and hands the status changes over.
	phaseRelease
	numPhases
)

// Phases names the round's phases, in order.
var Phases = [numPhases]string{"catch-up", "read", "describe", "upkeep", "plan", "release"}

// roundPhases times one round's phases: mark(p) charges the time since the
// previous mark to p.
type roundPhases struct {
	began, last time.Time
	took        [numPhases]time.Duration
	// cpu is the thread's CPU clock at the start, and after end the
	// round's CPU time; cpuKnown says it was read both times (threadCPU).
	cpu      time.Duration
	cpuKnown bool
}

// newRoundPhases starts timing a round, and reading its CPU time if cpu
// is set (Config.RoundCPU: the caller keeps its thread).
func newRoundPhases(cpu bool) *roundPhases {
	now := time.Now()
	p := &roundPhases{began: now, last: now}
	if cpu {
		p.cpu, p.cpuKnown = threadCPU()
	}
	return p
}

// end reads the CPU time the round ran; the round's goroutine calls it
// on the thread it started on.
func (p *roundPhases) end() {
	if !p.cpuKnown {
		return
	}
	now, ok := threadCPU()
	p.cpu, p.cpuKnown = now-p.cpu, ok && now >= p.cpu
}

func (p *roundPhases) mark(phase int) {
	now := time.Now()
	p.took[phase] += now.Sub(p.last)
	p.last = now
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

// observeRound counts one round, timed by its phases.
func (s *Stats) observeRound(p *roundPhases) {
	d := p.last.Sub(p.began)
	s.observeRoundTime(d)
	for i, t := range p.took {
		s.RoundPhases[Phases[i]] += t
		if d > SlowRound {
			s.SlowRoundPhases[Phases[i]] += t
		}
	}
	if d > SlowRound {
		s.SlowRounds++
	}
	if p.cpuKnown {
		s.RoundCPU += p.cpu
		i, _ := slices.BinarySearch(RoundBounds, p.cpu)
		s.RoundCPUHist[i]++
		if d > SlowRound {
			s.SlowRoundCPU += p.cpu
		}
	}
}

// observeRoundTime counts one round that took d.
func (s *Stats) observeRoundTime(d time.Duration) {
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
	c.RoundHist, c.RoundCPUHist = slices.Clone(s.RoundHist), slices.Clone(s.RoundCPUHist)
	c.RoundPhases, c.SlowRoundPhases = maps.Clone(s.RoundPhases), maps.Clone(s.SlowRoundPhases)
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

// Plus returns the sum of s and o: the counters of two engines (two terms
// of one replica) as if one had counted both.
func (s Stats) Plus(o Stats) Stats {
	c := s.clone()
	c.Rounds += o.Rounds
	c.RoundTime += o.RoundTime
	c.RoundHist = addHist(c.RoundHist, o.RoundHist)
	c.RoundCPU += o.RoundCPU
	c.RoundCPUHist = addHist(c.RoundCPUHist, o.RoundCPUHist)
	c.SlowRoundCPU += o.SlowRoundCPU
	c.RoundPhases, c.SlowRoundPhases = addMap(c.RoundPhases, o.RoundPhases), addMap(c.SlowRoundPhases, o.SlowRoundPhases)
	c.SlowRounds += o.SlowRounds
	c.FullReads += o.FullReads
	c.Behind += o.Behind
	c.Plans += o.Plans
	c.Early += o.Early
	c.Planned, c.Started = addMap(c.Planned, o.Planned), addMap(c.Started, o.Started)
	c.Done, c.Failed = addMap(c.Done, o.Done), addMap(c.Failed, o.Failed)
	c.BudgetRefused += o.BudgetRefused
	c.Resolved += o.Resolved
	c.Delivered += o.Delivered
	c.Released += o.Released
	c.Proposed += o.Proposed
	c.Cancelled += o.Cancelled
	return c
}

// addHist adds histogram b's counts into a (a copy), bucket by bucket.
func addHist(a, b []int64) []int64 {
	if len(b) > len(a) {
		a = append(a, make([]int64, len(b)-len(a))...)
	}
	for i, n := range b {
		a[i] += n
	}
	return a
}

// addMap adds b's counts into a (a copy, or a new map when a is nil).
func addMap[V int64 | time.Duration](a, b map[string]V) map[string]V {
	if a == nil {
		a = map[string]V{}
	}
	for k, v := range b {
		a[k] += v
	}
	return a
}
