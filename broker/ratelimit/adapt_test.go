package ratelimit_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/ratelimit/ratelimittest"
)

// ec2Bucket is EC2's side of one bucket, on the manual clock.
type ec2Bucket struct {
	size, refill, tokens float64
	last                 time.Time
}

func (b *ec2Bucket) take(now time.Time) bool {
	b.tokens = math.Min(b.size, b.tokens+b.refill*now.Sub(b.last).Seconds())
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// acquire runs Acquire, advancing clk in steps while it waits on a timer.
func acquire(t *testing.T, clk *ratelimittest.ManualClock, l *ratelimit.Limiter, c ratelimit.Class, step time.Duration) ratelimit.Turn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		turn ratelimit.Turn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		turn, err := l.Acquire(ctx, c)
		done <- result{turn, err}
	}()
	for {
		bctx, bcancel := context.WithCancel(ctx)
		blocked := make(chan error, 1)
		go func() { blocked <- clk.BlockUntil(bctx, 1) }()
		select {
		case r := <-done:
			bcancel()
			if r.err != nil {
				t.Fatalf("Acquire: %v", r.err)
			}
			return r.turn
		case err := <-blocked:
			bcancel()
			if err != nil {
				t.Fatalf("Acquire never returned: %v", err)
			}
			clk.Advance(step)
		}
	}
}

// TestAdaptLearnsSlowBucket: EC2's Create bucket holds 1 token and refills
// 0.05/s where the model says 100 and 5/s. One caller after another, each
// retrying until EC2 accepts, 150 Creates are throttled at most 5% of the
// time, take at most 1.2× the floor (149 refills of 20 s), and end up
// pacing at most 20% slower than EC2 refills, never faster.
func TestAdaptLearnsSlowBucket(t *testing.T) {
	fixed := func() time.Duration { return time.Millisecond }
	throttled, took, floor := slowBucket(t, 150, 0.05, fixed)
	if throttled > 150/20 {
		t.Errorf("%d throttles, want at most 5%% of the calls", throttled)
	}
	if took > floor*12/10 {
		t.Errorf("took %v, more than 1.2x the floor of %v", took, floor)
	}
}

// TestAdaptDelaysOnTheWay: the same, with each call spending a random 0 to
// 500 ms on the way to EC2 and as long back (a round trip up to 5% of the
// refill interval, changing from call to call). What the bucket learns
// bounds EC2's interval whatever the delays, so once learned it is not
// throttled again, but for one try of a shorter pause per 100 calls.
func TestAdaptDelaysOnTheWay(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	delay := func() time.Duration { return time.Duration(rng.Int64N(int64(500 * time.Millisecond))) }
	throttled, took, floor := slowBucket(t, 300, 0.05, delay)
	if throttled > 300/20 {
		t.Errorf("%d throttles, want at most 5%% of the calls", throttled)
	}
	if took > floor*12/10 {
		t.Errorf("took %v, more than 1.2x the floor of %v", took, floor)
	}
}

// slowBucket sends calls one after another, each retried until accepted,
// against an EC2 bucket of 1 token refilled at refill, each leg of each
// call delayed by delay(). It checks what the limiter learned and returns
// the throttles, the time taken and the floor (calls-1 refills).
func slowBucket(t *testing.T, calls int, refill float64, delay func() time.Duration) (throttled int, took, floor time.Duration) {
	t.Helper()
	clk := ratelimittest.NewManualClock(epoch)
	l := ratelimit.New(ratelimit.Config{Clock: clk, Adapt: true})
	ec2 := &ec2Bucket{size: 1, refill: refill, tokens: 1, last: epoch}
	c := ratelimit.CreateNetworkInterface
	var late []int // the calls throttled after the first 20
	for i := range calls {
		for {
			turn := acquire(t, clk, l, c, 50*time.Millisecond)
			clk.Advance(delay()) // on the way to EC2
			ok := ec2.take(clk.Now())
			clk.Advance(delay()) // and back
			if ok {
				turn.Done(ratelimit.Accepted)
				break
			}
			throttled++
			if i >= 20 {
				late = append(late, i)
			}
			turn.Done(ratelimit.Throttled)
		}
	}
	took = clk.Now().Sub(epoch)
	floor = time.Duration(float64(calls-1) / refill * float64(time.Second))
	t.Logf("%d calls, %d throttled (%.1f%%; after the first 20 calls: %v); took %v, floor %v (%.2fx); learned %+v",
		calls+throttled, throttled, 100*float64(throttled)/float64(calls+throttled), late,
		took, floor, took.Seconds()/floor.Seconds(), l.Bucket(c))
	if len(late) > (calls-20)/speedUpEvery {
		t.Errorf("throttled at calls %v after the first 20, want at most one per %d calls (the tries of a shorter pause)", late, speedUpEvery)
	}
	if b := l.Bucket(c); b.Size != 1 || b.Refill > refill || b.Refill < refill/1.2 {
		t.Errorf("learned bucket %+v, want size 1 and a refill in [%.3f, %.3f]", b, refill/1.2, refill)
	}
	if s := l.Stats()[c]; s.Drained != int64(throttled) {
		t.Errorf("drained %d times for %d throttles", s.Drained, throttled)
	}
	return throttled, took, floor
}

// speedUpEvery is how many accepted calls in a row a settled bucket
// paces before it tries a shorter pause (adapt.go).
const speedUpEvery = 100

// TestAdaptOneAtATime: once throttled, a bucket lets one call out at a time,
// the next only after the previous one's answer and a pause; the callers
// queued meanwhile never go out together.
func TestAdaptOneAtATime(t *testing.T) {
	clk := ratelimittest.NewManualClock(epoch)
	l := ratelimit.New(ratelimit.Config{Clock: clk, Adapt: true})
	c := ratelimit.CreateNetworkInterface
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	turn, err := l.Acquire(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	turn.Done(ratelimit.Throttled)
	if b := l.Bucket(c); b.Size != 1 || b.Refill >= 5 {
		t.Fatalf("after a throttle the bucket is %+v, want one token refilled slower than the model's 5/s", b)
	}
	pause := time.Duration(float64(time.Second) / l.Bucket(c).Refill)

	const callers = 4
	got := make(chan ratelimit.Turn, callers)
	for range callers {
		go func() {
			turn, err := l.Acquire(ctx, c)
			if err != nil {
				t.Error(err)
			}
			got <- turn
		}()
	}
	for i := range callers {
		// Exactly one caller waits on the clock (the first in line);
		// the rest wait for their turn without a timer.
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(pause - time.Millisecond)
		select {
		case <-got:
			t.Fatalf("caller %d went out before the pause had passed", i)
		case <-time.After(20 * time.Millisecond):
		}
		clk.Advance(time.Millisecond)
		turn := <-got
		clk.Advance(10 * pause) // long after: still nobody else out
		select {
		case <-got:
			t.Fatalf("a second caller went out while caller %d's call was unanswered", i)
		case <-time.After(20 * time.Millisecond):
		}
		turn.Done(ratelimit.Accepted)
		pause = time.Duration(float64(time.Second) / l.Bucket(c).Refill)
	}
}

// TestAdaptStartsSlowly: a new bucket lets one call out, then one more per
// the first answer, then two per answer; a bucket EC2 never throttles ends
// up the model's, and the whole burst went out without waiting for refill.
func TestAdaptStartsSlowly(t *testing.T) {
	clk := ratelimittest.NewManualClock(epoch)
	l := ratelimit.New(ratelimit.Config{Clock: clk, Adapt: true})
	c := ratelimit.Mutating // 50 tokens, 49 usable
	model := l.Bucket(c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan ratelimit.Turn, model.Size)
	for range model.Size {
		go func() {
			turn, err := l.Acquire(ctx, c)
			if err != nil {
				t.Error(err)
			}
			got <- turn
		}()
	}
	var out []ratelimit.Turn
	collect := func(want int) {
		t.Helper()
		for range want {
			out = append(out, <-got)
		}
		select {
		case <-got:
			t.Fatalf("more than %d calls out after %d answers", len(out), len(out)-want)
		case <-time.After(20 * time.Millisecond):
		}
	}
	collect(1)
	out[0].Done(ratelimit.Accepted)
	collect(1)
	answered := 2
	out[1].Done(ratelimit.Accepted)
	for len(out) < model.Size {
		collect(min(2, model.Size-len(out)))
		out[answered].Done(ratelimit.Accepted)
		answered++
	}
	for _, turn := range out[answered:] {
		turn.Done(ratelimit.Accepted)
	}
	if now := clk.Now(); !now.Equal(epoch) {
		t.Errorf("the burst waited for refill (%v)", now.Sub(epoch))
	}
	if b := l.Bucket(c); b != model {
		t.Errorf("bucket %+v after a burst EC2 accepted, want the model's %+v", b, model)
	}
	if s := l.Stats()[c]; s.Taken != int64(model.Size) || s.Drained != 0 {
		t.Errorf("stats %+v, want %d taken and nothing drained", s, model.Size)
	}
}
