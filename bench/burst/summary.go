package burst

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// spread is the minimum, median and maximum of a figure over repetitions.
type spread struct{ Min, Median, Max float64 }

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{s[0], med, s[len(s)-1]}
}

func (s spread) String() string {
	if s.Min == s.Max {
		return fmt.Sprintf("%.3f", s.Median)
	}
	return fmt.Sprintf("%.3f / %.3f / %.3f", s.Min, s.Median, s.Max)
}

// Summary is one variant at one size and time scale over its seeds.
type Summary struct {
	Variant   string  `json:"variant"`
	Nodes     int     `json:"nodes"`
	TimeScale float64 `json:"time_scale"`
	// Runs is how many seeds ran to the end; Failed how many did not.
	Runs   int `json:"runs"`
	Failed int `json:"failed"`
	// Ratio is completion over the problem's floor, OwnRatio over the
	// system's own call-pattern floor, P99Ratio the p99 time to address
	// over the problem's floor; Completion in simulated seconds.
	Completion spread `json:"completion_s"`
	Ratio      spread `json:"ratio"`
	OwnRatio   spread `json:"own_ratio"`
	P99Ratio   spread `json:"p99_ratio"`
	// TimeOptimalRatio and P99TimeOptimalRatio are completion and the p99
	// time to address over the time-optimal floor, where the variant has
	// one: the floor that counts with prefixes, where a mix of Assigns and
	// new ENIs ends sooner than the fewest calls.
	TimeOptimalRatio    spread `json:"ratio_time_optimal"`
	P99TimeOptimalRatio spread `json:"p99_ratio_time_optimal"`
	// IMDSRatio is completion over the time-optimal floor with awssim's
	// IMDS lag (Result.IMDSBoundSim), an extra column beside the floor
	// that counts.
	IMDSRatio spread `json:"ratio_time_optimal_imds"`
	Throttled spread `json:"request_limit_exceeded"`
}

// Summaries groups the results by variant, node count and time scale, in
// the order they first appear, over their seeds.
func (r Report) Summaries() []Summary {
	type key struct {
		v     string
		n     int
		scale float64
	}
	var order []key
	groups := map[key][]Result{}
	for _, x := range r.Results {
		k := key{x.Variant, x.Nodes, x.TimeScale}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], x)
	}
	var out []Summary
	for _, k := range order {
		s := Summary{Variant: k.v, Nodes: k.n, TimeScale: k.scale}
		var comp, ratio, own, p99, opt, p99opt, imds, thr []float64
		for _, x := range groups[k] {
			if x.Status != StatusOK {
				s.Failed++
				continue
			}
			s.Runs++
			comp = append(comp, x.CompletionSim)
			thr = append(thr, float64(x.Throttled))
			if x.LowerBoundSim > 0 {
				ratio = append(ratio, x.Ratio)
				p99 = append(p99, x.TTA.P99/x.LowerBoundSim)
			}
			if x.OwnFloorSim > 0 {
				own = append(own, x.OwnRatio)
			}
			if x.TimeOptimalBoundSim > 0 {
				opt = append(opt, x.RatioTimeOptimal)
				p99opt = append(p99opt, x.TTA.P99/x.TimeOptimalBoundSim)
			}
			if x.IMDSBoundSim > 0 {
				imds = append(imds, x.RatioIMDS)
			}
		}
		s.Completion, s.Ratio, s.OwnRatio, s.P99Ratio, s.Throttled = spreadOf(comp), spreadOf(ratio), spreadOf(own), spreadOf(p99), spreadOf(thr)
		s.TimeOptimalRatio, s.P99TimeOptimalRatio, s.IMDSRatio = spreadOf(opt), spreadOf(p99opt), spreadOf(imds)
		out = append(out, s)
	}
	return out
}

// WriteSummary prints the summaries, one row each, min / median / max
// where the seeds differ.
func (r Report) WriteSummary(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "summary (min / median / max over seeds)\tnodes\tscale\truns\tcompletion s\tcompletion / floor\tp99 / floor\tcompletion / time-optimal floor\tp99 / time-optimal floor\tcompletion / it with IMDS lag\tcompletion / own floor\tRequestLimitExceeded")
	for _, s := range r.Summaries() {
		runs := fmt.Sprint(s.Runs)
		if s.Failed > 0 {
			runs += fmt.Sprintf(" (+%d failed)", s.Failed)
		}
		fmt.Fprintf(tw, "%s\t%d\t%g\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Variant, s.Nodes, s.TimeScale, runs,
			s.Completion, s.Ratio, s.P99Ratio, s.TimeOptimalRatio, s.P99TimeOptimalRatio, s.IMDSRatio, s.OwnRatio, s.Throttled)
	}
	return tw.Flush()
}
