package scale

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/allotnet/allot/bench/burst"
)

// The way back down and up again runs at the burst benchmark's full size.
const (
	DefaultUpDownNodes       = burst.DefaultNodes
	DefaultUpDownPodsPerNode = burst.DefaultPodsPerNode
)

// releaseActions are the calls a release makes, in the order it makes them.
var releaseActions = []string{"UnassignPrivateIpAddresses", "DetachNetworkInterface", "DeleteNetworkInterface"}

// UpDownLine is the JSON line of an up-down run.
type UpDownLine struct {
	Nodes       int                  `json:"nodes"`
	Pods        int                  `json:"pods"`
	TimeScale   float64              `json:"time_scale"`
	Status      string               `json:"status"`
	Error       string               `json:"error,omitempty"`
	Load        string               `json:"load"`
	FirstRatio  float64              `json:"first_burst_ratio"`
	FirstFloor  float64              `json:"first_burst_floor_s"`
	FirstCompl  float64              `json:"first_burst_completion_s"`
	UpDown      *burst.UpDownFigures `json:"updown"`
	Problems    []string             `json:"problems,omitempty"`
	InUseFreed  int                  `json:"in_use_freed"`
	SecondRatio float64              `json:"second_burst_ratio"`
}

// NewUpDownLine takes an up-down run's figures from the burst result.
func NewUpDownLine(r burst.Result, load string) UpDownLine {
	l := UpDownLine{
		Nodes: r.Nodes, Pods: r.Pods, TimeScale: r.TimeScale, Status: r.Status, Error: r.Error, Load: load,
		FirstRatio: r.Ratio, FirstFloor: r.LowerBoundSim, FirstCompl: r.CompletionSim, UpDown: r.UpDown,
		Problems: r.Problems,
	}
	if r.UpDown != nil {
		l.InUseFreed, l.SecondRatio = r.UpDown.InUseFreed, r.UpDown.Up.Ratio
		l.Problems = append(l.Problems, r.UpDown.Problems...)
	}
	return l
}

// WriteUpDown prints the way down and the second burst as a table, then
// the JSON line.
func WriteUpDown(w io.Writer, l UpDownLine) error {
	fmt.Fprintf(w, "up-down-up: %d nodes, %d pods, time scale %g, status %s, load %s\n", l.Nodes, l.Pods, l.TimeScale, l.Status, l.Load)
	if u := l.UpDown; u != nil {
		fmt.Fprintf(w, "%-40s %12s %12s %12s\n", "way down", "calls", "minimum", "extra")
		names := slices.Sorted(maps.Keys(u.DownCalls))
		for _, a := range releaseActions {
			if !slices.Contains(names, a) {
				names = append(names, a)
			}
		}
		for _, a := range names {
			minimum := "-"
			if slices.Contains(releaseActions, a) {
				minimum = fmt.Sprint(u.DownMinimum[a])
			}
			fmt.Fprintf(w, "%-40s %12d %12s %12d\n", a, u.DownCalls[a], minimum, u.DownExtra[a])
		}
		fmt.Fprintf(w, "%-40s %12d\n", "pods deleted", u.PodsDeleted)
		fmt.Fprintf(w, "%-40s %12d\n", "releases proposed", u.Proposed)
		fmt.Fprintf(w, "%-40s %12d\n", "addresses given back", u.ReleasedAddrs)
		fmt.Fprintf(w, "%-40s %12d\n", "RequestLimitExceeded (way down)", u.DownThrottled)
		fmt.Fprintf(w, "%-40s %12.1f %12.1f\n", "back at warm targets (sim s) / floor", u.BackToWarmSim, u.ReleaseFloorSim)
		fmt.Fprintf(w, "%-40s %12.1f\n", "ENIs given up all gone (sim s)", u.SettledSim)
		fmt.Fprintf(w, "%-40s %12d\n", "nodes not back at warm", u.NotWarm)
		fmt.Fprintf(w, "%-40s %12d %12s\n", "in-use addresses freed", u.InUseFreed, fmt.Sprintf("(%d polls)", u.InUsePolls))
		fmt.Fprintf(w, "%-40s %12.1f %12.1f %12.3f\n", "first burst: completion / floor (sim s)", l.FirstCompl, l.FirstFloor, l.FirstRatio)
		fmt.Fprintf(w, "%-40s %12.1f %12.1f %12.3f\n", "second burst: completion / floor (sim s)", u.Up.CompletionSim, u.Up.LowerBoundSim, u.Up.Ratio)
		fmt.Fprintf(w, "%-40s %12d %12d\n", "second burst: pods placed / pods", u.Up.Placed, u.Up.Pods)
		fmt.Fprintf(w, "second burst: calls %s; minimum %s\n", counts(u.Up.Calls), counts(u.Up.Minimum))
	}
	for _, p := range l.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	if l.Error != "" {
		fmt.Fprintf(w, "error: %s\n", l.Error)
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// counts prints a count map as "action=n ..." in name order.
func counts[N int | int64](m map[string]N) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(out, " ")
}
