// Package cni measures what a container runtime waits for on every pod:
// ADD and DEL latency through a CNI plugin binary, exec'd by libcni against
// real network namespaces. BenchmarkCNILatency runs allot (plugin, agent,
// broker, awssim) and the reference ptp + host-local plugins from
// containernetworking/plugins side by side in the same run, interleaved call
// by call so both see the same machine noise, and prints a table and a final
// JSON line. It reports ratios; it asserts no timing.
package cni

import (
	"math"
	"slices"
	"time"
)

// Summary describes one set of latencies.
type Summary struct {
	N                       int
	P50, P90, P99, Min, Max time.Duration
	Mean                    time.Duration
}

// Summarize computes percentiles by the nearest-rank method (the smallest
// sample with at least p% of the samples at or below it), so every reported
// figure is a latency that was actually measured.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Summary{
		N: len(s), P50: rank(s, 50), P90: rank(s, 90), P99: rank(s, 99),
		Min: s[0], Max: s[len(s)-1], Mean: sum / time.Duration(len(s)),
	}
}

// rank is the nearest-rank percentile of sorted samples.
func rank(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// ms renders a duration in milliseconds with microsecond precision.
func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
