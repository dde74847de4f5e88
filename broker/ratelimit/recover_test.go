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

// callLog is one answer of mutatingRun's.
type callLog struct {
	at        time.Time
	throttled bool
	paced     bool // the bucket was paced after this answer
}

// mutatingRun sends Attach-bucket calls one after another for d, each leg
// of each call taking 50 ms, against ec2; answer, if not nil, may overrule
// EC2's answer to call i (jitter). It appends each answer to log.
func mutatingRun(t *testing.T, clk *ratelimittest.ManualClock, l *ratelimit.Limiter, ec2 *ec2Bucket, d time.Duration,
	answer func(i int, ok bool) bool, log *[]callLog) {
	t.Helper()
	c := ratelimit.Mutating
	const leg = 50 * time.Millisecond
	end := clk.Now().Add(d)
	for clk.Now().Before(end) {
		turn := acquire(t, clk, l, c, 10*time.Millisecond)
		clk.Advance(leg)
		ok := ec2.take(clk.Now())
		if answer != nil {
			ok = answer(len(*log), ok)
		}
		clk.Advance(leg)
		if ok {
			turn.Done(ratelimit.Accepted)
		} else {
			turn.Done(ratelimit.Throttled)
		}
		*log = append(*log, callLog{at: clk.Now(), throttled: !ok, paced: l.Bucket(c).Size == 1})
	}
}

// TestAdaptDoubtsOneThrottle: EC2's Attach bucket is the model's and the
// limiter has run at the model's rate for a while when one call is
// throttled although EC2's bucket held a token for it: it arrived early,
// held up on the way less than the one before it. The bucket is drained
// but not paced, nothing else is throttled, and the calls after it go out
// at the model's rate.
func TestAdaptDoubtsOneThrottle(t *testing.T) {
	clk := ratelimittest.NewManualClock(epoch)
	l := ratelimit.New(ratelimit.Config{Clock: clk, Adapt: true})
	model := l.Bucket(ratelimit.Mutating)
	ec2 := &ec2Bucket{size: 50, refill: 5, tokens: 50, last: epoch}
	var log []callLog
	jitter := -1
	mutatingRun(t, clk, l, ec2, 2*time.Minute, func(i int, ok bool) bool {
		if jitter < 0 && clk.Now().Sub(epoch) >= 30*time.Second {
			jitter = i
			return false
		}
		return ok
	}, &log)
	var throttled, paced, after int
	for i, x := range log {
		if x.throttled {
			throttled++
		}
		if x.paced {
			paced++
		}
		if i > jitter && clk.Now().Sub(x.at) <= time.Minute {
			after++
		}
	}
	t.Logf("%d calls, %d throttled (one forced at call %d), %d answers left the bucket paced; %d in the last minute; bucket %+v",
		len(log), throttled, jitter, paced, after, l.Bucket(ratelimit.Mutating))
	if throttled != 1 {
		t.Errorf("%d throttles, want only the forced one", throttled)
	}
	if paced > 0 {
		t.Errorf("the bucket was paced after %d answers, want never", paced)
	}
	if min := int(0.95 * model.Refill * 60); after < min {
		t.Errorf("%d calls in the last minute, want at least %d (95%% of the model's %.0f/s)", after, min, model.Refill)
	}
	if s := l.Stats()[ratelimit.Mutating]; s.Drained != 1 {
		t.Errorf("drained %d times, want 1", s.Drained)
	}
}

// TestAdaptPacesOnASecondThrottle: the limiter has run at the model's rate
// when another tool in the account starts spending half of EC2's Attach
// bucket (it empties it, and leaves us 2.5 tokens a second). The first
// throttle only puts the bucket in doubt; the second, soon after, makes it
// paced, and from then on it is throttled rarely and goes out at most of
// EC2's rate.
func TestAdaptPacesOnASecondThrottle(t *testing.T) {
	clk := ratelimittest.NewManualClock(epoch)
	l := ratelimit.New(ratelimit.Config{Clock: clk, Adapt: true})
	ec2 := &ec2Bucket{size: 50, refill: 5, tokens: 50, last: epoch}
	var log []callLog
	mutatingRun(t, clk, l, ec2, 30*time.Second, nil, &log)
	if n := len(log); n == 0 || log[n-1].paced {
		t.Fatalf("paced before any pressure (%d calls)", n)
	}
	for _, x := range log {
		if x.throttled {
			t.Fatalf("throttled at the model's rate against the model's bucket")
		}
	}
	ec2.refill, ec2.tokens = 2.5, 0
	start := len(log)
	mutatingRun(t, clk, l, ec2, 20*time.Minute, nil, &log)
	var throttles []int // call index of each throttle since the pressure began
	firstPaced := -1
	for i, x := range log[start:] {
		if x.throttled {
			throttles = append(throttles, i)
		}
		if x.paced && firstPaced < 0 {
			firstPaced = i
		}
	}
	var lastMinutes int
	for _, x := range log {
		if clk.Now().Sub(x.at) <= 10*time.Minute && !x.throttled {
			lastMinutes++
		}
	}
	rate := float64(lastMinutes) / (10 * time.Minute).Seconds()
	t.Logf("%d calls since the pressure began, throttled at %v, paced from call %d; %.2f/s accepted in the last ten minutes; bucket %+v",
		len(log)-start, throttles, firstPaced, rate, l.Bucket(ratelimit.Mutating))
	if len(throttles) < 2 || firstPaced != throttles[1] {
		t.Errorf("paced from call %d, want from the second throttle (throttles at %v)", firstPaced, throttles)
	}
	if len(throttles) > 2+(len(log)-start)/100 {
		t.Errorf("%d throttles for %d calls, want the two that found the pressure and under 1%% after", len(throttles), len(log)-start)
	}
	if rate < 0.75*2.5 {
		t.Errorf("%.2f calls a second accepted, want at least 75%% of EC2's 2.5/s", rate)
	}
}
