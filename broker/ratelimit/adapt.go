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
//     empty and to hold one token, so one call is out at a time and the next
//     leaves a pause after the answer to the last accepted one. Measuring
//     from the answer, not the send, means network delay can only lengthen
//     the gap EC2 sees, never shorten it.
//   - A throttled pause was too short, an accepted one long enough (EC2
//     refilled a token in it). Until a pause has been accepted it grows
//     sixteenfold per throttle; then it is bisected (geometrically, at most
//     halving) between the longest too short and the shortest long enough,
//     and settles on the latter once they are within 10%.
//   - Settled, it tries a pause 8% shorter after 100 accepted calls in a
//     row or an hour (EC2 time) without a throttle, so the rate creeps back
//     up when the pressure goes; back at the model's rate, the bucket is
//     the model's again. A throttle at a pause that used to be long enough
//     says the pressure grew (or that pause was at the edge): the pause
//     grows by a quarter, then doubles per throttle, and the search starts
//     over.
//   - The rate never drops below a thousandth of the model's.
//
// A bucket that is never throttled never becomes paced: with EC2's limits as
// modelled, only the slow start (a few round trips) differs.
const (
	searchGrowth = 16
	settleRatio  = 1.1
	speedUpStep  = 0.92
	speedUpEvery = 100
	quietPeriod  = time.Hour
	floorShare   = 1000
)

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
	quietSince       time.Time
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

// startPacing makes b paced after its first throttle. l.mu is held.
func (l *Limiter) startPacing(c Class, b *bucket, now time.Time) {
	model := time.Duration(float64(time.Second) / l.model(c).Refill)
	b.pace = &pacing{
		lastOK: now, changed: make(chan struct{}), model: model, max: model * floorShare,
		pause: searchGrowth * model, quietSince: now,
	}
	b.tokens, b.held = 0, 0
	b.epoch++
	b.wake()
}

// pacedDone takes EC2's answer to a paced call. l.mu is held.
func (l *Limiter) pacedDone(b *bucket, sent, now time.Time, o Outcome) {
	p := b.pace
	p.busy = false
	defer p.wake()
	gap := sent.Sub(p.lastOK)
	switch o {
	case Unknown:
		p.lastOK = now
		return
	case Throttled:
		p.throttled(gap, now)
		return
	}
	p.lastOK = now
	p.accepted(gap, now, l.scale)
	if p.pause <= p.model {
		// Back at the model's rate: the pressure has gone.
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
	case p.enough > 0 && p.enough <= p.tooShort:
		// Long enough before, not now: the pressure grew, or the pause
		// that held was at the edge (a network delay lengthened the gap
		// EC2 saw). Only a little slower, then, and doubling from there.
		p.enough = 0
		p.pause = p.tooShort * 5 / 4
	case p.enough == 0 && p.found:
		p.pause = 2 * p.tooShort
	case p.enough == 0:
		p.pause = max(searchGrowth*p.tooShort, searchGrowth*p.model)
	default:
		p.pause = next(p.tooShort, p.enough)
	}
	p.pause = min(p.pause, p.max)
}

// accepted learns from an accepted call after a pause of gap.
func (p *pacing) accepted(gap time.Duration, now time.Time, scale float64) {
	p.streak++
	p.found = true
	if gap > 0 && (p.enough == 0 || gap < p.enough) {
		p.enough = gap
	}
	if p.enough == 0 {
		return
	}
	if p.tooShort >= p.enough {
		p.tooShort = p.enough / 2
	}
	settled := float64(p.enough) <= float64(p.tooShort)*settleRatio
	quiet := now.Sub(p.quietSince) >= time.Duration(float64(quietPeriod)/scale)
	if settled && (p.streak >= speedUpEvery || quiet) {
		// Try a shorter pause once: next() lands on speedUpStep*enough.
		p.tooShort = time.Duration(float64(p.enough) * speedUpStep * speedUpStep)
		p.streak, p.quietSince = 0, now
	}
	p.pause = next(p.tooShort, p.enough)
}

// next is the pause to try between a too short and a long enough one.
func next(tooShort, enough time.Duration) time.Duration {
	if float64(enough) <= float64(tooShort)*settleRatio {
		return enough
	}
	return max(time.Duration(math.Sqrt(float64(tooShort)*float64(enough))), enough/2)
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
