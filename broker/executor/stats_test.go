package executor

import (
	"testing"
	"time"
)

func TestRoundQuantile(t *testing.T) {
	s := newStats()
	// 98 fast rounds, two slow ones: the p99 is the slow ones' bucket.
	for range 98 {
		s.observeRound(3 * time.Millisecond)
	}
	s.observeRound(80 * time.Millisecond)
	s.observeRound(90 * time.Millisecond)
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
	s.observeRound(time.Minute)
	if q := RoundQuantile(s.RoundHist, 1); q != -1 {
		t.Errorf("max beyond the bounds: %s, want -1", q)
	}
	// The clone's histogram is its own.
	c := s.clone()
	s.observeRound(time.Millisecond)
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
