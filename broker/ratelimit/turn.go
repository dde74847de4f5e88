package ratelimit

import (
	"math"
	"time"
)

// Outcome is how EC2 answered a call, as Turn.Done reports it.
type Outcome int

// The outcomes Turn.Done takes.
const (
	// Unknown: no answer from EC2 (the request failed on the way, or was
	// never sent). The limiter assumes it took a token.
	Unknown Outcome = iota
	// Accepted: EC2's bucket let the call through, whatever the call's
	// own result.
	Accepted
	// Throttled: EC2 answered RequestLimitExceeded.
	Throttled
)

// Turn is one token handed out by Acquire.
type Turn struct {
	l     *Limiter
	class Class
	epoch int
	sent  time.Time // when the token was handed out
}

// Done reports EC2's answer to the call the turn was for. Call it exactly
// once per Turn; a zero Turn ignores it.
func (t Turn) Done(o Outcome) {
	if t.l == nil {
		return
	}
	l := t.l
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	b := l.bucketLocked(t.class, now)
	if o == Throttled {
		b.stats.Drained++
		b.tokens = math.Min(b.tokens, 0)
	}
	if !l.adapt {
		return
	}
	lastSent := b.acceptedSent
	if o == Accepted && t.sent.After(lastSent) {
		b.acceptedSent = t.sent
	}
	if t.epoch != b.epoch {
		// A call sent under an earlier state of the bucket, answered
		// late: EC2 took a token at some time up to now.
		if b.pace != nil && o != Throttled && now.After(b.pace.lastOK) {
			b.pace.lastOK = now
		}
		return
	}
	if b.leaving && o == Accepted && now.Sub(b.leftAt) >= time.Duration(float64(quietPeriod)/l.scale) {
		// A paced bucket's try of the model held for the quiet period:
		// the pressure is gone.
		b.leaving, b.resume, b.leaveEvery = false, 0, 0
	}
	switch {
	case b.pace != nil:
		l.pacedDone(b, t.sent, lastSent, now, o)
	case o == Throttled && b.doubtful():
		// The first throttle of a bucket the model served well: the
		// bucket is drained (above) and doubted, not paced yet.
		b.doubt, b.trusted = true, 0
		b.epoch++
	case o == Throttled:
		b.doubt = false
		l.startPacing(t.class, b, now)
	default:
		b.trust(o)
		b.release()
	}
}

// startSlowly holds back all but one token of a new bucket: a model far
// larger than EC2's real bucket then costs one throttle, not a burst of
// them (release lets the rest out).
func (b *bucket) startSlowly() {
	b.held = b.size - math.Min(b.tokens, 1)
	b.tokens = math.Min(b.tokens, 1)
	b.started = 1
}

// release lets more of a slowly starting bucket out after EC2 accepted a
// call: one token after the first answer (it only proved the bucket held
// one), two after each later one, so the tokens out double with every
// round trip; once as many as the model's bucket holds have been let out,
// the bucket is the model's.
func (b *bucket) release() {
	if b.held <= 0 {
		return
	}
	rel := math.Min(b.held, math.Min(2, b.started))
	b.held -= rel
	b.started += rel
	if b.tokens < 0 {
		// Callers waiting on credit take new turns (Acquire); what has
		// refilled towards the next token stays.
		b.tokens -= math.Floor(b.tokens)
	}
	b.tokens += rel
	if b.started >= b.size {
		b.tokens = math.Min(b.size, b.tokens+b.held)
		b.held = 0
	}
	b.wake()
}

// wake makes the callers waiting on b take new turns.
func (b *bucket) wake() {
	close(b.changed)
	b.changed = make(chan struct{})
}
