package ratelimit_test

import (
	"testing"
	"time"

	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/ratelimit/ratelimittest"
)

// TestAdaptRecoversWhenThePressureGoes: EC2's Attach bucket is the
// model's (50 tokens, 5/s) but another tool in the account has just spent
// it, so the limiter's first call is throttled and the bucket turns paced.
// Each call takes 50 ms to EC2 and 50 ms back, as real EC2 calls do. The
// pressure never comes back: within ten minutes the bucket must be the
// model's again, and the calls of the last minute go out at the model's
// rate (one caller, one call after another).
func TestAdaptRecoversWhenThePressureGoes(t *testing.T) {
	clk := ratelimittest.NewManualClock(epoch)
	l := ratelimit.New(ratelimit.Config{Clock: clk, Adapt: true})
	c := ratelimit.Mutating
	model := l.Bucket(c)
	ec2 := &ec2Bucket{size: 50, refill: 5, tokens: 0, last: epoch}
	const leg = 50 * time.Millisecond
	var throttled int
	var accepted []time.Time
	for clk.Now().Sub(epoch) < 20*time.Minute {
		turn := acquire(t, clk, l, c, 10*time.Millisecond)
		clk.Advance(leg)
		ok := ec2.take(clk.Now())
		clk.Advance(leg)
		if ok {
			accepted = append(accepted, clk.Now())
			turn.Done(ratelimit.Accepted)
			continue
		}
		throttled++
		turn.Done(ratelimit.Throttled)
	}
	var lastMinute int
	for _, at := range accepted {
		if clk.Now().Sub(at) <= time.Minute {
			lastMinute++
		}
	}
	t.Logf("%d calls accepted, %d throttled; in the last minute %d; the bucket is %+v (model %+v)", len(accepted), throttled, lastMinute, l.Bucket(c), model)
	if b := l.Bucket(c); b != model {
		t.Errorf("after twenty minutes without pressure the bucket is %+v, want the model's %+v", b, model)
	}
	if lastMinute < int(0.9*model.Refill*60) {
		t.Errorf("%d calls accepted in the last minute, want at least %d (90%% of the model's %.0f/s)", lastMinute, int(0.9*model.Refill*60), model.Refill)
	}
}

// TestAdaptTriesTheModelLessOften: another tool keeps spending half of
// EC2's Attach bucket (25 tokens left to us, refilled at 2.5/s), so every
// try of the model is throttled once the real bucket runs dry. Each failed
// try puts the bucket back to its pause and the next waits for twice as
// many accepted calls: over an hour the throttles stay under 1% of the
// calls and come further apart, and the calls go out at least at 75% of
// EC2's rate.
func TestAdaptTriesTheModelLessOften(t *testing.T) {
	clk := ratelimittest.NewManualClock(epoch)
	l := ratelimit.New(ratelimit.Config{Clock: clk, Adapt: true})
	c := ratelimit.Mutating
	ec2 := &ec2Bucket{size: 25, refill: 2.5, tokens: 0, last: epoch}
	const leg = 50 * time.Millisecond
	var throttled, accepted int
	var at []time.Duration // when each throttle came
	for clk.Now().Sub(epoch) < time.Hour {
		turn := acquire(t, clk, l, c, 10*time.Millisecond)
		clk.Advance(leg)
		ok := ec2.take(clk.Now())
		clk.Advance(leg)
		if ok {
			accepted++
			turn.Done(ratelimit.Accepted)
			continue
		}
		throttled++
		at = append(at, clk.Now().Sub(epoch).Round(time.Second))
		turn.Done(ratelimit.Throttled)
	}
	rate := float64(accepted) / time.Hour.Seconds()
	t.Logf("%d calls accepted (%.2f/s against EC2's 2.5/s), %d throttled, at %v; the bucket is %+v", accepted, rate, throttled, at, l.Bucket(c))
	if throttled*100 > accepted {
		t.Errorf("%d throttles for %d accepted calls, want under 1%%", throttled, accepted)
	}
	if n := len(at); n >= 4 && at[n-1]-at[n-2] <= at[2]-at[1] {
		t.Errorf("throttles at %v: the tries of the model do not come further apart", at)
	}
	if rate < 0.75*2.5 {
		t.Errorf("%.2f calls a second accepted, want at least 75%% of EC2's 2.5/s", rate)
	}
}
