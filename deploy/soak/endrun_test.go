package soak

import (
	"context"
	"testing"
	"time"
)

// TestEndRunWaitsForEveryFault checks when a run ends: after Duration
// without EveryFault; with it, not before every kind of fault was
// injected, unless three times Duration passed.
func TestEndRunWaitsForEveryFault(t *testing.T) {
	const d = 50 * time.Millisecond
	ends := func(every bool) (*soak, <-chan time.Time, time.Time) {
		s := newSoak(nil, Config{Duration: d, EveryFault: every})
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		ended := make(chan time.Time, 1)
		start := time.Now()
		go func() {
			s.endRun(ctx, cancel)
			ended <- time.Now()
		}()
		return s, ended, start
	}
	wait := func(ended <-chan time.Time) time.Time {
		select {
		case at := <-ended:
			return at
		case <-time.After(30 * time.Second):
			t.Fatal("the run never ended")
			return time.Time{}
		}
	}

	_, ended, start := ends(false)
	if at := wait(ended); at.Sub(start) < d {
		t.Errorf("without EveryFault the run ended after %v, before its %v", at.Sub(start), d)
	}

	// Every kind but one: the run goes on past Duration, then ends once
	// the last kind is counted.
	s, ended, start := ends(true)
	for _, k := range FaultKinds[1:] {
		s.faults.count(k)
	}
	time.Sleep(d + 20*time.Millisecond)
	select {
	case at := <-ended:
		if !s.everyFaultSeen() && at.Sub(start) < 3*d {
			t.Fatalf("the run ended after %v with %s never injected", at.Sub(start), FaultKinds[0])
		}
	default:
	}
	s.faults.count(FaultKinds[0])
	wait(ended)

	// A kind never injected: the run ends at three times Duration.
	_, ended, start = ends(true)
	if at := wait(ended); at.Sub(start) < 3*d {
		t.Errorf("with a kind of fault never injected the run ended after %v, before 3 × %v", at.Sub(start), d)
	}
}
