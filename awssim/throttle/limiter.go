package throttle

import (
	"maps"
	"sync"
	"time"

	"github.com/allotnet/allot/awssim/simclock"
)

// Limiter holds the account's buckets. It is safe for concurrent use.
type Limiter struct {
	clock simclock.Clock

	mu       sync.Mutex
	disabled bool
	specs    map[string]Spec
	buckets  map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time // simulated time of the last refill
}

// New returns a limiter with the given bucket table (DefaultSpecs when nil),
// every bucket full.
func New(clock simclock.Clock, specs map[string]Spec) *Limiter {
	if specs == nil {
		specs = DefaultSpecs()
	}
	return &Limiter{clock: clock, specs: maps.Clone(specs), buckets: map[string]*bucket{}}
}

// Take takes one token from the named bucket and reports whether there was
// one. Buckets with no spec are unlimited.
func (l *Limiter) Take(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.disabled {
		return true
	}
	spec, ok := l.specs[name]
	if !ok {
		return true
	}
	b := l.refillLocked(name, spec)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Tokens returns how many tokens the named bucket holds now.
func (l *Limiter) Tokens(name string) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	spec, ok := l.specs[name]
	if !ok {
		return 0
	}
	return l.refillLocked(name, spec).tokens
}

func (l *Limiter) refillLocked(name string, spec Spec) *bucket {
	now := l.clock.Now()
	b, ok := l.buckets[name]
	if !ok {
		b = &bucket{tokens: spec.Capacity, last: now}
		l.buckets[name] = b
		return b
	}
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = min(spec.Capacity, b.tokens+dt*spec.Refill)
		b.last = now
	}
	return b
}

// SetDisabled turns throttling off (every Take succeeds) or back on.
func (l *Limiter) SetDisabled(off bool) {
	l.mu.Lock()
	l.disabled = off
	l.mu.Unlock()
}

// SetSpec changes (or adds) one bucket's spec; the bucket is refilled to its
// new capacity.
func (l *Limiter) SetSpec(name string, s Spec) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.specs[name] = s
	delete(l.buckets, name)
}

// Specs returns a copy of the bucket table.
func (l *Limiter) Specs() map[string]Spec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.specs)
}

// Reset refills every bucket.
func (l *Limiter) Reset() {
	l.mu.Lock()
	l.buckets = map[string]*bucket{}
	l.mu.Unlock()
}

// Disabled reports whether throttling is off.
func (l *Limiter) Disabled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.disabled
}
