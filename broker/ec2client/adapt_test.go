package ec2client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/throttle"
	"github.com/allotnet/allot/broker/ratelimit"
)

// TestLearnsTighterBucket: EC2's Create bucket holds 1 token and refills
// 0.05/s (an account with low limits, or other tenants using most of it),
// while the limiter's model says 100 and 5/s. 160 Creates, all asked for at
// once and each retried by its caller until it succeeds (as the engine
// retries a failed action), must be throttled at most 5% of the time, and
// the limiter must end paced at one token per EC2's interval, learned no
// shorter than EC2's (up to 8% shorter while it tries a faster pace) and no
// longer than 1.5× (a pause learned far too long would waste the bucket). EC2 time runs 250× faster, so a refill is 80 ms and the run
// ~16 s; how long it took against the floor (199 refills) is logged, not
// asserted: every pause is counted from the last answer, so a busy machine
// lengthens the run without the limiter learning anything wrong.
func TestLearnsTighterBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ~14 s")
	}
	const creates, refill, scale = 200, 0.05, 250
	sc := testScenario()
	sc.Throttle.Buckets = map[string]throttle.Spec{"CreateNetworkInterface": {Capacity: 1, Refill: refill}}
	sim, err := awssim.Start(context.Background(), awssim.Config{Scenario: sc, TimeScale: scale, AdminAddr: "off", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	lim := ratelimit.New(ratelimit.Config{TimeScale: scale, Adapt: true})
	c := newClient(t, sim, lim, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	start := time.Now()
	var wg sync.WaitGroup
	for range creates {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := c.CreateENI(ctx, CreateENIInput{SubnetID: testSubnet})
				if err == nil {
					return
				}
				if !IsThrottle(err) {
					t.Errorf("create: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	floor := time.Duration(float64(creates-1) / refill / scale * float64(time.Second))

	ac := sim.Counters()["CreateNetworkInterface"]
	share := float64(ac.Throttled) / float64(ac.Calls)
	t.Logf("CreateNetworkInterface: %d calls, %d throttled (%.1f%%); took %v, floor %v (%.2fx); learned %+v",
		ac.Calls, ac.Throttled, 100*share, took.Round(time.Millisecond), floor, took.Seconds()/floor.Seconds(),
		lim.Bucket(ratelimit.CreateNetworkInterface))
	if ac.Calls-ac.Throttled != creates {
		t.Errorf("%d creates accepted, want %d", ac.Calls-ac.Throttled, creates)
	}
	if share > 0.05 {
		t.Errorf("%d of %d creates throttled (%.1f%%), want at most 5%%", ac.Throttled, ac.Calls, 100*share)
	}
	truth := refill * scale // EC2's refill per wall second
	if learned := lim.Bucket(ratelimit.CreateNetworkInterface); learned.Size != 1 || learned.Refill > truth*1.1 || learned.Refill < truth/1.5 {
		t.Errorf("limiter learned %+v, want one token refilled at %.2f/s, at most 1.1x faster or 1.5x slower", learned, truth)
	}
	checkCountersAgree(t, c, sim)
}
