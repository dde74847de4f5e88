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
	// Adapt makes each bucket learn from EC2's answers (Turn.Done) when
	// EC2's real bucket is smaller or slower than the model (adapt.go):
	// a burst starts slowly, and after a throttle the bucket paces one call
	// at a time at a learned rate. Without it a throttle only drains the
	// bucket.
	Adapt bool
}

// Stats are one bucket's counters.
type Stats struct {
	// Taken is the tokens handed out (calls let through, or about to be).
	Taken int64
	// Waited is the total time callers were told to wait for their tokens.
	Waited time.Duration
	// Drained counts the throttles reported (Drain, or Turn.Done).
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
	adapt        bool

	mu      sync.Mutex
	buckets map[Class]*bucket
}

type bucket struct {
	size   float64
	refill float64 // tokens per second, already scaled
	tokens float64 // negative while callers wait on credit
	last   time.Time
	stats  Stats

	// The rest is used only with Config.Adapt (adapt.go).
	held    float64 // tokens of size not yet released while starting slowly
	started float64 // tokens let out while starting slowly
	epoch   int     // bumped whenever pace is set or cleared
	// changed is closed, and replaced, when callers waiting on credit must
	// take a new turn (tokens released, or the bucket turned paced).
	changed chan struct{}
	pace    *pacing // non-nil while EC2 throttles harder than the model
	// acceptedSent is the latest send of a call EC2 accepted (adapt.go
	// bounds EC2's refill interval by it).
	acceptedSent time.Time
	// leaving is set for the quiet period after a paced bucket went back
	// to the model (adapt.go, leave) at leftAt: resume is the pause it goes
	// back to if EC2 throttles meanwhile, and leaveEvery how many accepted
	// calls in a row its next try waits for (doubling after each try that
	// failed).
	leaving    bool
	leftAt     time.Time
	resume     time.Duration
	leaveEvery int
	// doubt is set by the first throttle of a bucket running at the model
	// (adapt.go, doubtful): until trusted more of its calls sent since
	// have been accepted, a second throttle makes it paced.
	doubt   bool
	trusted int
}

// New returns a limiter whose buckets start full.
func New(cfg Config) *Limiter {
	share, scale := normalize(cfg.Share, cfg.TimeScale)
	clock := cfg.Clock
	if clock == nil {
		clock = RealClock{}
	}
	return &Limiter{share: share, scale: scale, clock: clock, adapt: cfg.Adapt, buckets: map[Class]*bucket{}}
}

// Bucket returns the scaled bucket the limiter enforces for c: the model's,
// or while c is paced (adapt.go) one token at the learned rate.
func (l *Limiter) Bucket(c Class) Bucket {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.buckets[c]; ok && b.pace != nil {
		return Bucket{Size: 1, Refill: float64(time.Second) / float64(b.pace.pause)}
	}
	return l.model(c)
}

// model is the scaled bucket of the table for c.
func (l *Limiter) model(c Class) Bucket {
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
		sb := l.model(c)
		b = &bucket{size: float64(sb.Size), refill: sb.Refill, tokens: float64(sb.Size), last: now,
			changed: make(chan struct{})}
		if l.adapt {
			b.startSlowly()
		}
		l.buckets[c] = b
		return b
	}
	if now.After(b.last) {
		add := b.refill * now.Sub(b.last).Seconds()
		if b.held > 0 {
			// Starting slowly, refill waits with the held tokens for
			// EC2's answers to release it (turn.go).
			b.held = math.Min(b.size-math.Max(b.tokens, 0), b.held+add)
		} else {
			b.tokens = math.Min(b.size, b.tokens+add)
		}
		b.last = now
	}
	return b
}

// Wait blocks until a token of class c is the caller's. It returns ctx's
// error, without taking a token, if ctx is already done or its deadline comes
// before the token would; if ctx ends while waiting, the reserved token is
// lost rather than returned, because later waiters were already scheduled
// behind it and giving it back could let two of them out together. Wait
// tells the limiter nothing about EC2's answer; callers that know it use
// Acquire.
func (l *Limiter) Wait(ctx context.Context, c Class) error {
	t, err := l.Acquire(ctx, c)
	if err == nil {
		t.Done(Unknown)
	}
	return err
}

// Acquire is Wait for a caller that reports EC2's answer: the returned
// Turn's Done must be called once the call is answered (or known not to
// have been sent), since a paced bucket lets the next caller out only then.
func (l *Limiter) Acquire(ctx context.Context, c Class) (Turn, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Turn{}, err
		}
		l.mu.Lock()
		now := l.clock.Now()
		b := l.bucketLocked(c, now)
		if b.pace != nil {
			return l.acquirePaced(ctx, c, b) // unlocks
		}
		turn := Turn{l: l, class: c, epoch: b.epoch, sent: now}
		b.tokens--
		if b.tokens >= 0 {
			b.stats.Taken++
			l.mu.Unlock()
			return turn, nil
		}
		wait := time.Duration(math.Ceil(-b.tokens / b.refill * float64(time.Second)))
		if b.held > 0 {
			// Starting slowly: only an answer releases tokens.
			wait = 0
		}
		if dl, ok := ctx.Deadline(); ok && wait > 0 && now.Add(wait).After(dl) {
			// Nothing has been scheduled behind this reservation yet (we
			// hold the lock), so undoing it is exact.
			b.tokens++
			l.mu.Unlock()
			return Turn{}, fmt.Errorf("ratelimit: no %s token before the context deadline (%s away): %w", c, wait, context.DeadlineExceeded)
		}
		b.stats.Taken++
		b.stats.Waited += wait
		changed := b.changed
		l.mu.Unlock()

		var t Timer
		var fired <-chan time.Time
		if wait > 0 {
			t = l.clock.NewTimer(wait)
			fired = t.C()
		}
		select {
		case <-fired:
			turn.sent = l.clock.Now()
			return turn, nil
		case <-changed:
			// Tokens were released or the bucket turned paced: this
			// turn was reckoned on the old state, take a new one.
			stop(t)
			l.untake(c, false)
		case <-ctx.Done():
			stop(t)
			l.untake(c, true)
			return Turn{}, ctx.Err()
		}
	}
}

func stop(t Timer) {
	if t != nil {
		t.Stop()
	}
}

// untake undoes the Taken count of a wait that did not end in a token.
func (l *Limiter) untake(c Class, canceled bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[c]
	b.stats.Taken--
	if canceled {
		b.stats.Canceled++
	}
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

// Tokens returns the tokens c's bucket holds now, those held back while
// starting slowly included; negative while callers wait on credit. A paced
// bucket holds at most one.
func (l *Limiter) Tokens(c Class) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	b := l.bucketLocked(c, now)
	if b.pace != nil {
		return b.pace.tokens(now)
	}
	return b.tokens + b.held
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
