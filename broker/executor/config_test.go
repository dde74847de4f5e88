package executor_test

import (
	"testing"
	"time"

	"github.com/allotnet/allot/broker/clock"
	"github.com/allotnet/allot/broker/executor"
)

// TestTimersOnAScaledClock: on a clock five times faster than the wall
// clock, timers left zero get their default and timers set keep their
// value, both in the clock's time: a fifth of it on the wall clock.
func TestTimersOnAScaledClock(t *testing.T) {
	five, err := clock.Scaled(5)
	if err != nil {
		t.Fatal(err)
	}
	c := executor.Config{Interval: 50 * time.Millisecond, Gather: 3 * time.Millisecond, Clock: five}.Timers()
	want := map[string][2]time.Duration{
		"Interval":       {c.Interval, 10 * time.Millisecond},
		"Gather":         {c.Gather, 3 * time.Millisecond / 5},
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
	wall := executor.Config{Gather: 3 * time.Millisecond}.Timers()
	if wall.Gather != 3*time.Millisecond || wall.Interval != executor.DefaultInterval {
		t.Errorf("wall clock: Gather %v, Interval %v; want them as given and by default", wall.Gather, wall.Interval)
	}
}
