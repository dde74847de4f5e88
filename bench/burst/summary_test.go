package burst

import (
	"math"
	"testing"
)

// TestSummaries checks that repetitions of a variant are grouped by size
// and time scale, failed ones counted apart, and spread as min / median /
// max.
func TestSummaries(t *testing.T) {
	r := Report{Results: []Result{
		{Variant: "a", Nodes: 100, TimeScale: 5, Status: StatusOK, LowerBoundSim: 10, CompletionSim: 11, Ratio: 1.1, TTA: Percentiles{P99: 10.5}},
		{Variant: "a", Nodes: 100, TimeScale: 5, Status: StatusOK, LowerBoundSim: 10, CompletionSim: 13, Ratio: 1.3, TTA: Percentiles{P99: 12}},
		{Variant: "a", Nodes: 100, TimeScale: 5, Status: StatusOK, LowerBoundSim: 10, CompletionSim: 12, Ratio: 1.2, TTA: Percentiles{P99: 11}},
		{Variant: "a", Nodes: 100, TimeScale: 5, Status: StatusFailed},
		{Variant: "a", Nodes: 250, TimeScale: 5, Status: StatusOK, LowerBoundSim: 20, CompletionSim: 21, Ratio: 1.05},
		{Variant: "p", Nodes: 100, TimeScale: 1, Status: StatusOK, LowerBoundSim: 10, CompletionSim: 6, Ratio: 0.6,
			TimeOptimalBoundSim: 5, RatioTimeOptimal: 1.2, IMDSBoundSim: 5.5, RatioIMDS: 6 / 5.5, TTA: Percentiles{P99: 5.5}},
		{Variant: "p", Nodes: 100, TimeScale: 1, Status: StatusOK, LowerBoundSim: 10, CompletionSim: 7, Ratio: 0.7,
			TimeOptimalBoundSim: 5, RatioTimeOptimal: 1.4, IMDSBoundSim: 5.5, RatioIMDS: 7 / 5.5, TTA: Percentiles{P99: 6.5}},
	}}
	s := r.Summaries()
	if len(s) != 3 {
		t.Fatalf("%d summaries, want 3: %+v", len(s), s)
	}
	// With prefixes the time-optimal floor counts: completion and p99
	// over it, beside those over the fewest-calls floor.
	if p := s[2]; !near(p.TimeOptimalRatio, spread{1.2, 1.3, 1.4}) || !near(p.P99TimeOptimalRatio, spread{1.1, 1.2, 1.3}) || !near(p.Ratio, spread{0.6, 0.65, 0.7}) {
		t.Errorf("prefix summary %+v: want completion 1.2-1.4x and p99 1.1-1.3x of the time-optimal floor", p)
	}
	// The floor with IMDS's lag is a column of its own, beside it.
	if p := s[2]; !near(p.IMDSRatio, spread{6 / 5.5, 6.5 / 5.5, 7 / 5.5}) {
		t.Errorf("prefix summary %+v: want completion over the floor with IMDS lag 6/5.5 to 7/5.5", p)
	}
	if s[0].TimeOptimalRatio != (spread{}) || s[0].IMDSRatio != (spread{}) {
		t.Errorf("summary without a time-optimal floor has a ratio over it: %+v", s[0])
	}
	if s[0].Runs != 3 || s[0].Failed != 1 || s[0].Ratio != (spread{1.1, 1.2, 1.3}) || s[0].P99Ratio != (spread{1.05, 1.1, 1.2}) {
		t.Errorf("summary %+v", s[0])
	}
	if got := spreadOf([]float64{4, 1, 3, 2}); got != (spread{1, 2.5, 4}) {
		t.Errorf("spreadOf = %+v, want median 2.5", got)
	}
}

// near reports whether two spreads agree to rounding.
func near(a, b spread) bool {
	return math.Abs(a.Min-b.Min) < 1e-9 && math.Abs(a.Median-b.Median) < 1e-9 && math.Abs(a.Max-b.Max) < 1e-9
}
