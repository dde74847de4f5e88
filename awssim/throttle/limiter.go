package throttle

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/allotnet/allot/awssim/simclock"
)

// Limiter holds the account's buckets. It is safe for concurrent use.
type Limiter struct {
	clock simclock.Clock
	epoch time.Time // discrete refill counts whole seconds from here

	mu       sync.Mutex
	disabled bool
	sem      Semantics
	specs    map[string]Spec
	buckets  map[string]*bucket
	// tenant is the fraction of every bucket another tool takes (see
	// SetTenant).
	tenant float64
}

type bucket struct {
	spec   string // the table key of the bucket's spec
	tokens float64
	last   time.Time // simulated time of the last refill
	// tenantTaken is what the other tenant has taken from this bucket.
	tenantTaken float64
}

// New returns a limiter with the given bucket table (DefaultSpecs when nil),
// every bucket full.
func New(clock simclock.Clock, specs map[string]Spec) *Limiter {
	if specs == nil {
		specs = DefaultSpecs()
	}
	return &Limiter{clock: clock, epoch: clock.Now(), specs: maps.Clone(specs), buckets: map[string]*bucket{}}
}

// SetSemantics changes how buckets are keyed and refilled; when they
// change, every bucket starts over full.
func (l *Limiter) SetSemantics(sem Semantics) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sem == l.sem {
		return
	}
	l.sem = sem
	l.buckets = map[string]*bucket{}
}

// Semantics returns how buckets are keyed and refilled.
func (l *Limiter) Semantics() Semantics {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sem
}

// TakeAction takes one token from the bucket the action's request draws
// from (see Semantics) and reports whether there was one. narrowed says
// whether a Describe request carried a filter, IDs, MaxResults or
// NextToken. Actions the table does not cover always succeed.
func (l *Limiter) TakeAction(action string, narrowed bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	name, spec, ok := l.sem.bucketFor(action, narrowed)
	if !ok {
		return true
	}
	return l.takeLocked(name, spec)
}

// Take takes one token from the named bucket (whose spec is the table's
// entry of that name) and reports whether there was one. Buckets with no
// spec are unlimited.
func (l *Limiter) Take(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takeLocked(name, name)
}

func (l *Limiter) takeLocked(name, specName string) bool {
	if l.disabled {
		return true
	}
	b := l.refillLocked(name, specName)
	if b == nil {
		return true
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Tokens returns how many tokens the named bucket holds now (0 for a name
// that is neither in the table nor a per-API bucket in use).
func (l *Limiter) Tokens(name string) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	specName := name
	if b, ok := l.buckets[name]; ok {
		specName = b.spec
	}
	if b := l.refillLocked(name, specName); b != nil {
		return b.tokens
	}
	return 0
}

// Buckets returns the names of the buckets in use (per-API buckets
// included) and of every bucket in the table.
func (l *Limiter) Buckets() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[string]bool{}
	for n := range l.specs {
		seen[n] = true
	}
	for n := range l.buckets {
		seen[n] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// refillLocked returns the named bucket refilled to now, made full if new;
// nil if specName has no spec.
func (l *Limiter) refillLocked(name, specName string) *bucket {
	spec, ok := l.specs[specName]
	if !ok {
		return nil
	}
	now := l.clock.Now()
	b, ok := l.buckets[name]
	if !ok {
		// A bucket first used while another tenant is at work has already
		// lost that tenant's share.
		b = &bucket{spec: specName, tokens: spec.Capacity * (1 - l.tenant), last: now}
		l.buckets[name] = b
		return b
	}
	// The other tenant takes its fraction of every refill as it arrives.
	full := l.sem.refilled(b.tokens, spec.Capacity, spec.Refill, l.epoch, b.last, now)
	mine := l.sem.refilled(b.tokens, spec.Capacity, spec.Refill*(1-l.tenant), l.epoch, b.last, now)
	b.tenantTaken += full - mine
	b.tokens = mine
	if now.After(b.last) {
		b.last = now
	}
	return b
}

// SetTenant models another tool in the same account taking fraction f
// (0 <= f < 1) of every bucket from now on: f of what each bucket holds
// now, at once, and f of every refill after. It never asks for a token
// that isn't there, so it is never throttled itself, and it always gets
// its share first: what is left is what every other caller competes for.
// Zero stops it; setting the fraction it already has changes nothing.
func (l *Limiter) SetTenant(f float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f = min(max(f, 0), 0.99)
	if f == l.tenant {
		return
	}
	for name := range l.specs {
		l.refillLocked(name, name)
	}
	for name, b := range l.buckets {
		l.refillLocked(name, b.spec)
		take := b.tokens * f
		b.tokens -= take
		b.tenantTaken += take
	}
	l.tenant = f
}

// Tenant returns the other tenant's fraction (0: none).
func (l *Limiter) Tenant() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tenant
}

// TenantTaken returns the tokens the other tenant has taken, by bucket.
func (l *Limiter) TenantTaken() map[string]float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]float64{}
	for name, b := range l.buckets {
		if b.tenantTaken > 0 {
			out[name] = b.tenantTaken
		}
	}
	return out
}

// SetDisabled turns throttling off (every Take succeeds) or back on.
func (l *Limiter) SetDisabled(off bool) {
	l.mu.Lock()
	l.disabled = off
	l.mu.Unlock()
}

// SetSpec changes (or adds) one bucket's spec; the bucket (and every
// per-API bucket with that spec) is refilled to its new capacity.
func (l *Limiter) SetSpec(name string, s Spec) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.specs[name] = s
	for n, b := range l.buckets {
		if n == name || b.spec == name {
			delete(l.buckets, n)
		}
	}
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
