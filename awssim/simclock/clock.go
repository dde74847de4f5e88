// Package simclock is awssim's notion of time. Simulated time runs TimeScale
// times faster than the wall clock, so every rate, delay and lag of the
// simulated account can be expressed in simulated seconds and still keep its
// ratio to the others when a ten-minute scenario is run in seconds.
package simclock

import (
	"context"
	"sync"
	"time"
)

// Clock tells simulated time and turns simulated durations into real ones.
type Clock interface {
	// Now is the current simulated time.
	Now() time.Time
	// Real is how long d of simulated time lasts on the wall clock.
	Real(d time.Duration) time.Duration
	// Scale is simulated seconds per real second.
	Scale() float64
}

// Scaled is a Clock that starts at the wall-clock time of its creation and
// then advances scale times faster than the wall clock.
type Scaled struct {
	start time.Time // carries the monotonic reading
	scale float64
}

var _ Clock = (*Scaled)(nil)

// NewScaled returns a clock running scale times faster than real time; a
// scale of zero or less means 1.
func NewScaled(scale float64) *Scaled {
	if scale <= 0 {
		scale = 1
	}
	return &Scaled{start: time.Now(), scale: scale}
}

// Now returns the simulated time.
func (c *Scaled) Now() time.Time {
	elapsed := time.Since(c.start)
	return c.start.Add(time.Duration(float64(elapsed) * c.scale))
}

// Real converts a simulated duration to wall-clock time.
func (c *Scaled) Real(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.scale)
}

// Scale returns simulated seconds per real second.
func (c *Scaled) Scale() float64 { return c.scale }

// Sleep waits d of simulated time on c, or until ctx is done.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(c.Real(d))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Manual is a Clock that moves only when told to; tests use it to make
// refill and lag arithmetic exact.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

var _ Clock = (*Manual)(nil)

// NewManual returns a manual clock set to start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the clock's current time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Advance moves the clock forward by d.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	m.now = m.now.Add(d)
	m.mu.Unlock()
}

// Real returns d unchanged: a manual clock has no wall-clock relation.
func (m *Manual) Real(d time.Duration) time.Duration { return d }

// Scale returns 1.
func (m *Manual) Scale() float64 { return 1 }
