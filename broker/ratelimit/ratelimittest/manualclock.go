// Package ratelimittest holds a clock for driving ratelimit.Limiter in tests
// and simulations without sleeping.
package ratelimittest

import (
	"context"
	"sync"
	"time"

	"github.com/allotnet/allot/broker/ratelimit"
)

// ManualClock is a ratelimit.Clock that moves only when told to. It lets tests and
// simulations drive the limiter through minutes of refill without sleeping.
// It is safe for concurrent use.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*manualTimer]struct{}
	// changed is closed and replaced whenever the set of pending timers
	// changes, so BlockUntil can wait without polling.
	changed chan struct{}
}

// NewManualClock returns a clock reading start.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start, timers: map[*manualTimer]struct{}{}, changed: make(chan struct{})}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock has been advanced by d.
// A timer for d <= 0 fires at once.
func (c *ManualClock) NewTimer(d time.Duration) ratelimit.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{clock: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers[t] = struct{}{}
	c.notifyLocked()
	return t
}

// Advance moves the clock forward by d and fires every timer that is due.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.at.After(c.now) {
			t.ch <- c.now
			delete(c.timers, t)
		}
	}
	c.notifyLocked()
}

// Pending returns the number of timers waiting to fire.
func (c *ManualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// BlockUntil waits until exactly n timers are pending, which tells a test that
// n goroutines have gone to sleep on the clock. It returns ctx's error if ctx
// ends first.
func (c *ManualClock) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if len(c.timers) == n {
			c.mu.Unlock()
			return nil
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *ManualClock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

type manualTimer struct {
	clock *ManualClock
	at    time.Time
	ch    chan time.Time
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.timers[t]; !ok {
		return false
	}
	delete(c.timers, t)
	c.notifyLocked()
	return true
}

var _ ratelimit.Clock = (*ManualClock)(nil)
