package executor_test

import (
	"testing"
	"time"

	"github.com/allotnet/allot/broker/executor"
)

// TestWithTimeScale: timers left zero get their default divided by the
// scale; timers set are kept as given.
func TestWithTimeScale(t *testing.T) {
	c := executor.Config{Interval: 50 * time.Millisecond, Gather: 3 * time.Millisecond}.WithTimeScale(5)
	want := map[string][2]time.Duration{
		"Interval":       {c.Interval, 50 * time.Millisecond},
		"Gather":         {c.Gather, 3 * time.Millisecond},
		"WarmGather":     {c.WarmGather, executor.DefaultWarmGather / 5},
		"GatherMax":      {c.GatherMax, executor.DefaultGatherMax / 5},
		"Lookahead":      {c.Lookahead, executor.DefaultLookahead / 5},
		"FailureBackoff": {c.FailureBackoff, executor.DefaultFailureBackoff / 5},
		"ReleaseAfter":   {c.ReleaseAfter, executor.DefaultReleaseAfter / 5},
		"ReleaseTimeout": {c.ReleaseTimeout, executor.DefaultReleaseTimeout / 5},
	}
	for name, v := range want {
		if v[0] != v[1] {
			t.Errorf("%s = %v, want %v", name, v[0], v[1])
		}
	}
}
