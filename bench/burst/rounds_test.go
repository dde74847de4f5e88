package burst

import (
	"testing"
	"time"

	"github.com/allotnet/allot/broker/executor"
)

// TestRoundFigures: the burst's round quantiles come from the difference
// of the engine's counters at its start and end, by wall time and, when
// the rounds' CPU was read, by CPU time; without it the CPU figures stay
// 0 (not read) rather than a quantile of nothing.
func TestRoundFigures(t *testing.T) {
	bucket := func(d time.Duration) int {
		for i, b := range executor.RoundBounds {
			if d <= b {
				return i
			}
		}
		return len(executor.RoundBounds)
	}
	stats := func(wall, cpu map[time.Duration]int64) executor.Stats {
		s := executor.Stats{RoundHist: make([]int64, len(executor.RoundBounds)+1), RoundCPUHist: make([]int64, len(executor.RoundBounds)+1)}
		for d, n := range wall {
			s.RoundHist[bucket(d)] += n
			s.Rounds += n
		}
		for d, n := range cpu {
			s.RoundCPUHist[bucket(d)] += n
			s.RoundCPU += time.Duration(n) * d
		}
		return s
	}
	// Before the burst: 1,000 quick rounds, which the window leaves out.
	start := stats(map[time.Duration]int64{time.Millisecond: 1000}, map[time.Duration]int64{500 * time.Microsecond: 1000})
	end := stats(map[time.Duration]int64{time.Millisecond: 1000, 40 * time.Millisecond: 98, 400 * time.Millisecond: 2},
		map[time.Duration]int64{500 * time.Microsecond: 1000, 10 * time.Millisecond: 98, 30 * time.Millisecond: 2})
	end.SlowRoundCPU = 60 * time.Millisecond
	var res Result
	roundFigures(&res, start, end)
	near := func(got float64, want time.Duration) bool {
		return got >= float64(want)/float64(time.Millisecond) && got < 1.26*float64(want)/float64(time.Millisecond)
	}
	if res.Rounds != 100 || !near(res.RoundP50, 40*time.Millisecond) || !near(res.RoundP99, 400*time.Millisecond) {
		t.Errorf("rounds %d, wall p50 %v p99 %v ms; want 100, about 40 and 400", res.Rounds, res.RoundP50, res.RoundP99)
	}
	if !near(res.RoundCPUP50, 10*time.Millisecond) || !near(res.RoundCPUP99, 30*time.Millisecond) || res.SlowRoundCPUMs != 60 {
		t.Errorf("CPU p50 %v p99 %v ms, slow rounds' CPU %v ms; want about 10, 30 and 60", res.RoundCPUP50, res.RoundCPUP99, res.SlowRoundCPUMs)
	}
	unread := stats(map[time.Duration]int64{time.Millisecond: 1000, 40 * time.Millisecond: 100}, nil)
	res = Result{}
	roundFigures(&res, start, unread)
	if res.RoundCPUP50 != 0 || res.RoundCPUP99 != 0 {
		t.Errorf("CPU not read, yet p50 %v p99 %v", res.RoundCPUP50, res.RoundCPUP99)
	}
}
