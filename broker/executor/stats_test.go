package executor

import (
	"testing"
	"time"
)

func TestRoundQuantile(t *testing.T) {
	s := newStats()
	// 98 fast rounds, two slow ones: the p99 is the slow ones' bucket.
	for range 98 {
		s.observeRoundTime(3 * time.Millisecond)
	}
	s.observeRoundTime(80 * time.Millisecond)
	s.observeRoundTime(90 * time.Millisecond)
	if s.Rounds != 100 || s.RoundTime != 98*3*time.Millisecond+170*time.Millisecond {
		t.Fatalf("rounds %d time %s", s.Rounds, s.RoundTime)
	}
	p50, p99 := RoundQuantile(s.RoundHist, 0.5), RoundQuantile(s.RoundHist, 0.99)
	if p50 < 3*time.Millisecond || p50 > 4*time.Millisecond {
		t.Errorf("p50 %s, want the bucket holding 3ms", p50)
	}
	if p99 < 90*time.Millisecond || p99 > 114*time.Millisecond {
		t.Errorf("p99 %s, want the bucket holding 90ms", p99)
	}
	if q := RoundQuantile(make([]int64, len(RoundBounds)+1), 0.99); q != 0 {
		t.Errorf("no rounds: %s, want 0", q)
	}
	s.observeRoundTime(time.Minute)
	if q := RoundQuantile(s.RoundHist, 1); q != -1 {
		t.Errorf("max beyond the bounds: %s, want -1", q)
	}
	// The clone's histogram is its own.
	c := s.clone()
	s.observeRoundTime(time.Millisecond)
	if sum(c.RoundHist) != 101 {
		t.Errorf("clone counts %d rounds, want 101", sum(c.RoundHist))
	}
}

func sum(h []int64) (n int64) {
	for _, x := range h {
		n += x
	}
	return n
}

// TestSlowRoundPhases: a round's phases add up to its time, and only a
// round over SlowRound counts in the slow rounds' phases.
func TestSlowRoundPhases(t *testing.T) {
	s := newStats()
	at := time.Now()
	fast := &roundPhases{began: at, last: at.Add(30 * time.Millisecond)}
	fast.took[phaseRead], fast.took[phasePlan] = 20*time.Millisecond, 10*time.Millisecond
	slow := &roundPhases{began: at, last: at.Add(120 * time.Millisecond)}
	slow.took[phaseCatchUp], slow.took[phaseRead] = 100*time.Millisecond, 20*time.Millisecond
	s.observeRound(fast)
	s.observeRound(slow)
	if s.Rounds != 2 || s.SlowRounds != 1 {
		t.Fatalf("rounds %d, slow %d; want 2 and 1", s.Rounds, s.SlowRounds)
	}
	if got := s.RoundPhases["read"]; got != 40*time.Millisecond {
		t.Errorf("read over all rounds %v, want 40ms", got)
	}
	if got := s.SlowRoundPhases["catch-up"]; got != 100*time.Millisecond || s.SlowRoundPhases["plan"] != 0 {
		t.Errorf("slow rounds' phases %v, want catch-up 100ms and no plan", s.SlowRoundPhases)
	}
	c := s.clone()
	c.SlowRoundPhases["plan"] = time.Second
	if s.SlowRoundPhases["plan"] != 0 {
		t.Error("a clone shares its phases with the stats")
	}
}
