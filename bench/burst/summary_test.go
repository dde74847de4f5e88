package burst

import "testing"

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
	}}
	s := r.Summaries()
	if len(s) != 2 {
		t.Fatalf("%d summaries, want 2: %+v", len(s), s)
	}
	if s[0].Runs != 3 || s[0].Failed != 1 || s[0].Ratio != (spread{1.1, 1.2, 1.3}) || s[0].P99Ratio != (spread{1.05, 1.1, 1.2}) {
		t.Errorf("summary %+v", s[0])
	}
	if got := spreadOf([]float64{4, 1, 3, 2}); got != (spread{1, 2.5, 4}) {
		t.Errorf("spreadOf = %+v, want median 2.5", got)
	}
}
