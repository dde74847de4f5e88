package ec2client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/throttle"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/ratelimit/ratelimittest"
)

// TestThrottleDrainsAndRetries: another tenant has left awssim's Assign
// bucket nearly empty (capacity 1) while our limiter believes it has 100
// tokens. The second Assign is throttled; the client drains its own bucket,
// waits for the next token and succeeds, and the caller never sees the
// throttle.
func TestThrottleDrainsAndRetries(t *testing.T) {
	sc := testScenario()
	sc.Throttle.Buckets = map[string]throttle.Spec{"AssignPrivateIpAddresses": {Capacity: 1, Refill: 5}}
	sim := startSim(t, sc)
	// Our refill matches awssim's real-time rate (5/s × 100).
	lim := ratelimit.New(ratelimit.Config{TimeScale: 100})
	c := newClient(t, sim, lim, 0)
	ctx := context.Background()
	e, err := c.CreateENI(ctx, CreateENIInput{SubnetID: testSubnet})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.AssignAddresses(ctx, e.ID, 1, false); err != nil {
			t.Fatalf("assign %d: %v", i, err)
		}
	}
	throttled := c.Throttled()["AssignPrivateIpAddresses"]
	if throttled == 0 {
		t.Fatal("awssim never throttled: the test did not exercise the retry")
	}
	if d := lim.Stats()[ratelimit.AssignPrivateIPAddresses].Drained; d != throttled {
		t.Errorf("bucket drained %d times for %d throttles", d, throttled)
	}
	if got := sim.Counters()["AssignPrivateIpAddresses"].Throttled; got != throttled {
		t.Errorf("awssim throttled %d, client saw %d", got, throttled)
	}
	if got := describeOne(t, c, e.ID); len(got.Addresses) != 3 {
		t.Errorf("ENI has %d secondaries after 3 assigns, want 3 (a retry must not double-assign)", len(got.Addresses))
	}
	checkCountersAgree(t, c, sim)
}

// TestThrottleRetriesBounded: an action that is always throttled is tried
// 1 + MaxThrottleRetries times, then the throttle is returned.
func TestThrottleRetriesBounded(t *testing.T) {
	sc := testScenario()
	sim := startSim(t, sc)
	sim.SetFaults(map[string]awssim.Fault{"DeleteNetworkInterface": {ErrorRate: 1, ErrorCode: CodeRequestLimitExceeded}})
	c := newClient(t, sim, nil, 2)
	err := c.DeleteENI(context.Background(), "eni-0123456789abcdef0")
	if !IsThrottle(err) || Code(err) != CodeRequestLimitExceeded {
		t.Fatalf("always-throttled delete: %v, want RequestLimitExceeded", err)
	}
	if n := c.Calls()["DeleteNetworkInterface"]; n != 3 {
		t.Errorf("%d delete calls, want 3 (1 + 2 retries)", n)
	}
	if d := c.Limiter().Stats()[ratelimit.DeleteNetworkInterface].Drained; d != 3 {
		t.Errorf("drained %d times, want 3", d)
	}
	checkCountersAgree(t, c, sim)

	// Negative: no retries at all.
	c0 := newClient(t, sim, nil, -1)
	if err := c0.DeleteENI(context.Background(), "eni-0123456789abcdef0"); !IsThrottle(err) || c0.Calls()["DeleteNetworkInterface"] != 1 {
		t.Errorf("no-retry client: %v after %d calls, want a throttle after 1", err, c0.Calls()["DeleteNetworkInterface"])
	}
}

// TestEveryCallWaitsForAToken: with a bucket of one token on a manual
// clock, the second call does not reach EC2 until the clock has refilled a
// token; a canceled wait sends nothing and says why.
func TestEveryCallWaitsForAToken(t *testing.T) {
	sim := startSim(t, testScenario())
	clk := ratelimittest.NewManualClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	// Share 0.01: the Describe bucket holds 1 token and refills 0.2/s.
	lim := ratelimit.New(ratelimit.Config{Share: 0.01, Clock: clk})
	c := newClient(t, sim, lim, 0)
	ctx := context.Background()

	if _, err := c.DescribeSubnets(ctx, []string{testSubnet}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.DescribeSubnets(ctx, []string{testSubnet})
		done <- err
	}()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := sim.Counters()["DescribeSubnets"].Calls; n != 1 {
		t.Fatalf("awssim saw %d calls while the second waited for a token, want 1", n)
	}
	clk.Advance(5 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := sim.Counters()["DescribeSubnets"].Calls; n != 2 {
		t.Errorf("awssim saw %d calls after the refill, want 2", n)
	}

	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := c.DescribeSubnets(cctx, []string{testSubnet})
		done <- err
	}()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	err := <-done
	var ae *APIError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &ae) || ae.Code != "" || ae.Action != "DescribeSubnets" {
		t.Errorf("canceled wait: %#v, want *APIError wrapping context.Canceled", err)
	}
	if n := sim.Counters()["DescribeSubnets"].Calls; n != 2 {
		t.Errorf("a canceled wait reached awssim (%d calls)", n)
	}
}
