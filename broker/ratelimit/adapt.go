package ratelimit

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// The model of EC2's buckets (class.go, times Share) is what EC2 grants an
// account by default. Lower account limits, or other tenants spending the
// same buckets, make the real bucket smaller and slower; a limiter that only
// drains on RequestLimitExceeded and refills at the model's rate is then
// throttled on nearly every call. With Config.Adapt a bucket learns instead:
//
//   - A new bucket starts slowly (bucket.release), so a real bucket far
//     smaller than the model costs one throttle, not a burst of them.
//   - The first throttle makes the bucket paced: EC2's bucket is taken to be
//     empty and to hold one token, refilled every T, so one call is out at a
//     time and the next is sent a pause after the answer to the last
//     accepted one.
//   - What EC2 sees is the gap between the arrivals of two calls, and each
//     arrival lies between the call's send and its answer. So a call sent a
//     pause after the last accepted one's answer reaches EC2 at least that
//     pause after it: a throttle there says T is longer than the pause.
//     And a call accepted says T is no longer than from the last accepted
//     call's send to this one's answer (with one token, EC2 refilled a whole
//     one in between). These two bounds hold whatever the delays on the
//     way, so the learned T (the shortest such span, "enough") is never
//     shorter than EC2's, and pausing that long after an answer is never
//     throttled by a bucket that stayed the same: the gap EC2 sees is the
//     pause plus the delays, which can only lengthen it.
//   - Pacing from the send instead (or sending the next call before the last
//     one is answered, so that it arrives as the token refills) would save
//     the round trip, but the gap EC2 sees would then be the send gap plus
//     this call's delay on the way minus the last one's, shorter whenever
//     the last one was slow to arrive: it needs a margin of the last call's
//     whole round trip, which is what pacing from its answer is. The round
//     trip (milliseconds) is small beside a refill this slow (seconds).
//   - Until a call is accepted the pause grows sixteenfold per throttle;
//     then it is bisected geometrically between the longest pause that was
//     too short and enough, and settles on enough once the two are within
//     5%, or when a pause between them was accepted but taught nothing
//     (the round trip is wider than what is left to learn).
//   - Settled, it tries a pause 8% shorter after 100 accepted calls in a
//     row or an hour (EC2 time) without a throttle, so the rate creeps back
//     up when the pressure goes; a throttle there goes straight back to
//     enough. Back at the model's rate, the bucket is the model's again. A
//     throttle at enough says the pressure grew (or that EC2's bucket holds
//     more than one token, so accepted calls proved less): the pause grows
//     by a tenth, then doubles per throttle, and the search starts over.
//   - The bound above is loose by the round trips on either side of the
//     pause, so once EC2's interval is within a few round trips of the
//     model's (the pressure came from another tool for a moment, and went)
//     shorter pauses teach nothing and the bucket would stay paced at a
//     fraction of the model for good: one call out at a time can go no
//     faster than one per round trip. So a settled bucket whose pause is
//     within leaveRatio of the model's interval tries the model itself
//     after the same 100 accepted calls, starting slowly as a new bucket
//     does. A throttle within the quiet period after that puts it back to
//     the pause it had, and the next try waits for twice as many accepted
//     calls (up to leaveMax); a try that holds that long has left pacing.
//   - The rate never drops below a thousandth of the model's.
//   - A bucket that has been running at the model (started, not paced, not
//     trying the model after pacing) is not paced by one throttle: it is
//     drained and doubted (doubtful). EC2 reckons a call's token from its
//     arrival, so calls sent evenly but delayed unevenly on the way (a
//     retransmit, a descheduled process at either end) can arrive closer
//     together than the refill, and the one token kept back (SafetyTokens)
//     absorbs only one refill period of that. One such throttle says
//     little about EC2's bucket, and pacing costs much: one call out at a
//     time can go no faster than one per round trip, which at a refill of
//     5/s or faster is a fraction of the model's rate for as long as the
//     bucket takes to find its way back. A bucket EC2 really refills
//     slower is throttled again soon after its drain, since both buckets
//     were empty then and ours refills faster; so a second throttle of a
//     call sent after the first, before doubtWindow buckets' worth of such
//     calls were accepted, makes the bucket paced as above, at the price
//     of one throttle more.
//
// A bucket that is never throttled never becomes paced: with EC2's limits as
// modelled, only the slow start (a few round trips) differs.
const (
	searchGrowth = 16
	settleRatio  = 1.05
	speedUpStep  = 0.92
	speedUpEvery = 100
	quietPeriod  = time.Hour
	floorShare   = 1000
	leaveRatio   = 4
	leaveMax     = 32 * speedUpEvery
	doubtWindow  = 4
)

// doubtful reports whether a throttle now only puts b in doubt: b runs at
// the model (its slow start over, not paced, not trying the model after
// pacing) and no throttle has put it in doubt since doubtWindow buckets'
// worth of calls were accepted.
func (b *bucket) doubtful() bool {
	return b.pace == nil && b.held <= 0 && !b.leaving && !b.doubt
}

// trust counts a call sent since b was put in doubt and accepted; enough
// of them end the doubt.
func (b *bucket) trust(o Outcome) {
	if !b.doubt || o != Accepted {
		return
	}
	b.trusted++
	if float64(b.trusted) >= doubtWindow*b.size {
		b.doubt, b.trusted = false, 0
	}
}

// pacing is a paced bucket's state.
type pacing struct {
	lastOK  time.Time     // the answer to the last accepted call
	busy    bool          // a call is out
	queue   []*ticket     // callers waiting, first in line first
	changed chan struct{} // closed, and replaced, when a waiter may go

	model, max       time.Duration // the model's interval, the longest pause
	pause            time.Duration // what the next call waits after lastOK
	tooShort, enough time.Duration // bounds learned so far; 0 = none
	streak           int           // accepted calls since the last throttle or speed-up
	found            bool          // a paced call has been accepted
	probing          bool          // trying shorter pauses after a settled one (speed-up)
	quietSince       time.Time
	leaveEvery       int  // accepted calls in a row before trying the model
	leave            bool // try the model now
}

// ticket is one caller's place in a paced bucket's line; it is not empty
// because pointers to distinct zero-size values may be equal.
type ticket struct{ _ byte }

// tokens is what Limiter.Tokens reports for a paced bucket.
func (p *pacing) tokens(now time.Time) float64 {
	t := math.Min(1, float64(now.Sub(p.lastOK))/float64(p.pause))
	if p.busy {
		t--
	}
	return t - float64(len(p.queue))
}

func (p *pacing) wake() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// startPacing makes b paced after its first throttle, or after a throttle
// while it tried the model again (then it resumes the pause it had, and the
// next try waits twice as long). l.mu is held.
func (l *Limiter) startPacing(c Class, b *bucket, now time.Time) {
	model := time.Duration(float64(time.Second) / l.model(c).Refill)
	p := &pacing{
		lastOK: now, changed: make(chan struct{}), model: model, max: model * floorShare,
		pause: searchGrowth * model, quietSince: now, leaveEvery: speedUpEvery,
	}
	if b.leaving {
		p.pause, p.enough, p.tooShort, p.found = b.resume, b.resume, settledBelow(b.resume), true
		p.leaveEvery = min(2*b.leaveEvery, leaveMax)
		b.leaving = false
	}
	b.pace = p
	b.tokens, b.held = 0, 0
	b.epoch++
	b.wake()
}

// pacedDone takes EC2's answer to a paced call sent at sent; lastSent is
// the send of the last call EC2 accepted before it (zero: none seen). l.mu
// is held.
func (l *Limiter) pacedDone(b *bucket, sent, lastSent, now time.Time, o Outcome) {
	p := b.pace
	p.busy = false
	defer p.wake()
	gap := sent.Sub(p.lastOK)
	switch o {
	case Unknown:
		// Whether or not it took a token, the next pause counts from
		// it (and a bound from lastSent holds either way).
		p.lastOK = now
		return
	case Throttled:
		p.throttled(gap, now)
		return
	}
	span := gap // with no accepted call seen before, what held
	if !lastSent.IsZero() {
		span = now.Sub(lastSent)
	}
	p.lastOK = now
	p.accepted(gap, span, now, l.scale)
	if p.pause <= p.model || p.leave {
		// Back at the model's rate, or trying it: the pressure has gone,
		// or may have.
		if p.leave {
			b.leaving, b.leftAt, b.resume, b.leaveEvery = true, now, p.enough, p.leaveEvery
		}
		b.pace = nil
		b.epoch++
		b.tokens = 1
		b.startSlowly()
		b.wake()
	}
}

// throttled learns from a throttle after a pause of gap.
func (p *pacing) throttled(gap time.Duration, now time.Time) {
	p.streak, p.quietSince = 0, now
	p.tooShort = max(p.tooShort, gap)
	switch {
	case p.probing && p.enough > p.tooShort:
		// A shorter pause, tried to see whether the pressure went, did
		// not hold: back to the one that did, in one step.
		p.probing = false
		p.tooShort = max(p.tooShort, settledBelow(p.enough))
		p.pause = p.enough
	case p.enough > 0 && p.enough <= p.tooShort:
		// Enough before, not now: the pressure grew. A little slower,
		// then, and doubling from there if that is not enough.
		p.enough = 0
		p.pause = time.Duration(float64(p.tooShort) * settleRatio * settleRatio)
	case p.enough == 0 && p.found:
		p.pause = 2 * p.tooShort
	case p.enough == 0:
		p.pause = max(searchGrowth*p.tooShort, searchGrowth*p.model)
	default:
		p.pause = next(p.tooShort, p.enough)
	}
	p.pause = min(p.pause, p.max)
}

// accepted learns from a call accepted after a pause of gap, span after
// the last accepted call was sent.
func (p *pacing) accepted(gap, span time.Duration, now time.Time, scale float64) {
	p.streak++
	p.found = true
	learned := span > 0 && (p.enough == 0 || span < p.enough)
	if learned {
		p.enough = span
	}
	if p.enough == 0 {
		return
	}
	if p.tooShort >= p.enough || !learned && gap < p.enough {
		// A throttled pause as long as this one held (the pressure
		// eased), or a pause between the bounds that taught nothing:
		// settle on enough.
		p.tooShort = settledBelow(p.enough)
	}
	settled := float64(p.enough) <= float64(p.tooShort)*settleRatio
	if settled {
		p.probing = false
	}
	quiet := now.Sub(p.quietSince) >= time.Duration(float64(quietPeriod)/scale)
	near := p.enough <= leaveRatio*p.model
	if settled && near && (p.streak >= p.leaveEvery || quiet) {
		// Within a few round trips of the model: shorter pauses would
		// teach nothing, so try the model itself.
		p.leave = true
		return
	}
	if settled && !near && (p.streak >= speedUpEvery || quiet) {
		// Try a shorter pause once: next() lands on speedUpStep*enough.
		p.tooShort = time.Duration(float64(p.enough) * speedUpStep * speedUpStep)
		p.streak, p.quietSince = 0, now
		p.probing = true
	}
	p.pause = next(p.tooShort, p.enough)
}

// settledBelow is the longest too short pause that leaves enough settled.
func settledBelow(enough time.Duration) time.Duration {
	return time.Duration(math.Ceil(float64(enough) / settleRatio))
}

// next is the pause to try between a too short and a long enough one.
func next(tooShort, enough time.Duration) time.Duration {
	if float64(enough) <= float64(tooShort)*settleRatio {
		return enough
	}
	if tooShort <= 0 {
		return enough / 2
	}
	return time.Duration(math.Sqrt(float64(tooShort) * float64(enough)))
}

// acquirePaced waits, in FIFO order, for the paced bucket's one call to be
// answered and the pause after the last accepted one to pass. l.mu is held
// on entry and released on return.
func (l *Limiter) acquirePaced(ctx context.Context, c Class, b *bucket) (Turn, error) {
	p := b.pace
	w := new(ticket)
	p.queue = append(p.queue, w)
	start := l.clock.Now()
	leave := func() {
		p.queue = slices.DeleteFunc(p.queue, func(q *ticket) bool { return q == w })
		p.wake()
	}
	for {
		now := l.clock.Now()
		if b.pace != p {
			// The bucket is the model's again.
			leave()
			l.mu.Unlock()
			return l.Acquire(ctx, c)
		}
		var timer Timer
		if p.queue[0] == w && !p.busy {
			due := p.lastOK.Add(p.pause)
			if !now.Before(due) {
				leave()
				p.busy = true
				b.stats.Taken++
				b.stats.Waited += now.Sub(start)
				l.mu.Unlock()
				return Turn{l: l, class: c, epoch: b.epoch, sent: now}, nil
			}
			if dl, ok := ctx.Deadline(); ok && due.After(dl) {
				leave()
				l.mu.Unlock()
				return Turn{}, fmt.Errorf("ratelimit: no %s turn before the context deadline (%s away): %w", c, due.Sub(now), context.DeadlineExceeded)
			}
			timer = l.clock.NewTimer(due.Sub(now))
		}
		changed := p.changed
		l.mu.Unlock()
		var fired <-chan time.Time
		if timer != nil {
			fired = timer.C()
		}
		select {
		case <-fired:
		case <-changed:
		case <-ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		l.mu.Lock()
		if ctx.Err() != nil {
			leave()
			b.stats.Canceled++
			l.mu.Unlock()
			return Turn{}, ctx.Err()
		}
	}
}
