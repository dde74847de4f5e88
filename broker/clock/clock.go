// Package clock is the broker's time. Instants are always the wall clock's:
// every record in etcd carries them and every replica must agree on them.
// Durations — the engine's and the reconciler's timers, the EC2 token
// buckets' refill — are in the clock's own time, which against a simulated
// EC2 (awssim --time-scale) runs faster than the wall clock. Components are
// configured in the clock's time and ask it what that is on the wall, so
// the time scale is set in one place, main, and nothing below scales a
// timer by hand.
package clock

import (
	"fmt"
	"time"
)

// Clock is a time scale; the zero Clock is the real one.
type Clock struct {
	scale float64
}

// Real is the wall clock: one second per second.
func Real() Clock { return Clock{} }

// Scaled runs scale seconds per wall second (awssim's --time-scale).
func Scaled(scale float64) (Clock, error) {
	if scale <= 0 {
		return Clock{}, fmt.Errorf("time scale %g: want a positive number", scale)
	}
	return Clock{scale: scale}, nil
}

// Scale is the clock's seconds per wall second.
func (c Clock) Scale() float64 {
	if c.scale <= 0 {
		return 1
	}
	return c.scale
}

// Now is the wall clock's instant.
func (Clock) Now() time.Time { return time.Now() }

// Wall is how long d of the clock's time lasts on the wall clock.
func (c Clock) Wall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.Scale())
}
