package ratelimit

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// Config configures a Limiter.
type Config struct {
	// Share is the fraction of each EC2 bucket this client may use,
	// 0 < Share <= 1; anything else means 1.
	Share float64
	// TimeScale speeds refill up (10 = ten times faster; bucket sizes stay
	// the same), matching awssim's time scale; <= 0 means 1.
	TimeScale float64
	// Clock is the time source; nil means the wall clock.
	Clock Clock
}

// Stats are one bucket's counters.
type Stats struct {
	// Taken is the tokens handed out (calls let through, or about to be).
	Taken int64
	// Waited is the total time callers were told to wait for their tokens.
	Waited time.Duration
	// Drained counts Drain calls.
	Drained int64
	// Canceled counts waits abandoned because their context ended; the
	// token they reserved is not given back (see Wait).
	Canceled int64
}

// Limiter holds one token bucket per class. Callers reserve tokens in FIFO
// order: a caller that finds the bucket empty takes a token "on credit" (the
// count goes negative) and sleeps until refill has paid it back, so hundreds
// of waiters each sleep once instead of waking and racing for every token.
type Limiter struct {
	share, scale float64
	clock        Clock

	mu      sync.Mutex
	buckets map[Class]*bucket
}

type bucket struct {
	size   float64
	refill float64 // tokens per second, already scaled
	tokens float64 // negative while callers wait on credit
	last   time.Time
	stats  Stats
}

// New returns a limiter whose buckets start full.
func New(cfg Config) *Limiter {
	share, scale := normalize(cfg.Share, cfg.TimeScale)
	clock := cfg.Clock
	if clock == nil {
		clock = RealClock{}
	}
	return &Limiter{share: share, scale: scale, clock: clock, buckets: map[Class]*bucket{}}
}

// Bucket returns the scaled bucket the limiter enforces for c.
func (l *Limiter) Bucket(c Class) Bucket {
	b := BucketOf(c).Scaled(l.share, l.scale)
	if b.Size > SafetyTokens {
		b.Size -= SafetyTokens
	}
	return b
}

// SafetyTokens is how many tokens of each bucket the limiter never uses.
// EC2 refills its bucket from the moment the first call of a burst arrives,
// we refill ours from the moment that call is sent; when a later call
// reaches EC2 faster than that first one (a warm connection overtaking a
// fresh one), EC2's bucket is behind ours by the difference. One token of
// slack absorbs up to one refill period of such jitter (10 ms at 5/s and a
// time scale of 20) for the price of one token of burst.
const SafetyTokens = 1

// Share returns the configured share, normalized.
func (l *Limiter) Share() float64 { return l.share }

// TimeScale returns the configured time scale, normalized.
func (l *Limiter) TimeScale() float64 { return l.scale }

// bucketLocked returns c's bucket brought up to now; l.mu must be held.
func (l *Limiter) bucketLocked(c Class, now time.Time) *bucket {
	b, ok := l.buckets[c]
	if !ok {
		sb := l.Bucket(c)
		b = &bucket{size: float64(sb.Size), refill: sb.Refill, tokens: float64(sb.Size), last: now}
		l.buckets[c] = b
		return b
	}
	if now.After(b.last) {
		b.tokens = math.Min(b.size, b.tokens+b.refill*now.Sub(b.last).Seconds())
		b.last = now
	}
	return b
}

// Wait blocks until a token of class c is the caller's. It returns ctx's
// error, without taking a token, if ctx is already done or its deadline comes
// before the token would; if ctx ends while waiting, the reserved token is
// lost rather than returned, because later waiters were already scheduled
// behind it and giving it back could let two of them out together.
func (l *Limiter) Wait(ctx context.Context, c Class) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	now := l.clock.Now()
	b := l.bucketLocked(c, now)
	b.tokens--
	if b.tokens >= 0 {
		b.stats.Taken++
		l.mu.Unlock()
		return nil
	}
	wait := time.Duration(math.Ceil(-b.tokens / b.refill * float64(time.Second)))
	if dl, ok := ctx.Deadline(); ok && now.Add(wait).After(dl) {
		// Nothing has been scheduled behind this reservation yet (we hold
		// the lock), so undoing it is exact.
		b.tokens++
		l.mu.Unlock()
		return fmt.Errorf("ratelimit: no %s token before the context deadline (%s away): %w", c, wait, context.DeadlineExceeded)
	}
	b.stats.Taken++
	b.stats.Waited += wait
	l.mu.Unlock()

	t := l.clock.NewTimer(wait)
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		t.Stop()
		l.mu.Lock()
		b.stats.Taken--
		b.stats.Canceled++
		l.mu.Unlock()
		return ctx.Err()
	}
}

// TryTake takes a token of class c if one is there now, without waiting and
// without jumping ahead of callers already waiting.
func (l *Limiter) TryTake(c Class) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(c, l.clock.Now())
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	b.stats.Taken++
	return true
}

// Drain empties c's bucket. Call it when EC2 answered RequestLimitExceeded:
// someone else in the account used the tokens we counted on, so the real
// bucket is empty now. Waiters already scheduled keep their turns.
func (l *Limiter) Drain(c Class) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(c, l.clock.Now())
	if b.tokens > 0 {
		b.tokens = 0
	}
	b.stats.Drained++
}

// Tokens returns the tokens c's bucket holds now; negative while callers
// wait on credit.
func (l *Limiter) Tokens(c Class) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bucketLocked(c, l.clock.Now()).tokens
}

// Stats returns the counters of every bucket used so far.
func (l *Limiter) Stats() map[Class]Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[Class]Stats, len(l.buckets))
	for c, b := range l.buckets {
		out[c] = b.stats
	}
	return out
}
