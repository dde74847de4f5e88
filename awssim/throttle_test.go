package awssim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/allotnet/allot/awssim"
	simec2 "github.com/allotnet/allot/awssim/ec2"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/awssim/simclock"
	"github.com/allotnet/allot/awssim/throttle"
	"github.com/allotnet/allot/awssim/world"
)

func throttled(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "RequestLimitExceeded"
}

// missingENI is well formed and absent: DeleteNetworkInterface on it takes
// a token and answers NotFound, so the bucket can be measured without
// changing the world.
const missingENI = "eni-0fffffffffffffff0"

func (h *harness) deleteMissing() error {
	_, err := h.ec2.DeleteNetworkInterface(h.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(missingENI)})
	return err
}

// manualHarness serves testScenario's EC2 API, throttled with the default
// buckets, on a clock that moves only when the test advances it: what a
// burst gets through is then exact, however fast or slow this machine
// sends it.
func manualHarness(t *testing.T) (*harness, *simec2.Server, *simclock.Manual) {
	t.Helper()
	clk := simclock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w := world.New(world.Config{Clock: clk, Seed: 42})
	if err := scenario.Apply(w, testScenario()); err != nil {
		t.Fatal(err)
	}
	srv := simec2.New(simec2.Config{World: w, Limiter: throttle.New(clk, nil), Seed: 42})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return &harness{ec2: ec2.NewFromConfig(awssim.SDKConfig(hs.URL)), ctx: ctx}, srv, clk
}

// TestThrottleBurstAndRefill shows DeleteNetworkInterface's bucket (100
// tokens, 5/s simulated) through the real SDK: a burst gets exactly 100
// requests through and then RequestLimitExceeded, counted as such; each
// simulated second then lets exactly 5 more through, and the bucket never
// holds more than 100. The clock is advanced by hand, so the counts do not
// depend on how long the requests take (TestThrottleRefillFollowsTimeScale
// checks the refill against the wall clock at a time scale).
func TestThrottleBurstAndRefill(t *testing.T) {
	h, srv, clk := manualHarness(t)
	through := func() (n int) {
		t.Helper()
		for range 200 {
			err := h.deleteMissing()
			if throttled(err) {
				return n
			}
			if err == nil {
				t.Fatal("delete of a missing ENI succeeded")
			}
			n++ // NotFound: the request got through the bucket
		}
		t.Fatalf("%d requests through and none throttled; the bucket holds 100", n)
		return n
	}

	if n := through(); n != 100 {
		t.Fatalf("burst: %d requests through, want the bucket's 100", n)
	}
	for i := range 59 {
		if err := h.deleteMissing(); !throttled(err) {
			t.Fatalf("request %d after the burst, no time passed: %v, want RequestLimitExceeded", 102+i, err)
		}
	}
	if c := srv.Counters()["DeleteNetworkInterface"]; c.Calls != 160 || c.Throttled != 60 || c.Errors != 100 {
		t.Fatalf("counters %+v; want calls 160, throttled 60, errors 100", c)
	}

	for _, step := range []struct {
		advance time.Duration
		want    int
	}{
		{time.Second, 5},
		{3 * time.Second, 15},
		{time.Hour, 100}, // refilled to the bucket's size, no further
	} {
		clk.Advance(step.advance)
		if n := through(); n != step.want {
			t.Fatalf("%v simulated after the bucket emptied: %d requests through, want %d", step.advance, n, step.want)
		}
	}
}

// TestThrottleRefillFollowsTimeScale checks that a Sim's buckets refill on
// its scaled clock, at two time scales: an emptied DeleteNetworkInterface
// bucket (5/s simulated) holds 5 × scale tokens per real second later.
// The bucket is emptied in-process, far faster than it refills, and its
// content is bracketed by wall-clock readings taken before and after each
// step, so the check is exact however the machine schedules the test.
func TestThrottleRefillFollowsTimeScale(t *testing.T) {
	const bucket, capacity, refill = "DeleteNetworkInterface", 100.0, 5.0
	for _, scale := range []float64{10, 40} {
		t.Run(fmt.Sprintf("scale=%g", scale), func(t *testing.T) {
			h := start(t, awssim.Config{Scenario: testScenario(), TimeScale: scale})
			lim := h.sim.Throttle()
			// Empty the bucket; the refused take leaves less than one token.
			var beforeEmpty time.Time
			for {
				beforeEmpty = time.Now()
				if !lim.TakeAction(bucket, true) {
					break
				}
			}
			empty := time.Now()
			for _, wait := range []time.Duration{50 * time.Millisecond, 150 * time.Millisecond} {
				time.Sleep(wait)
				before := time.Now()
				got := lim.Tokens(bucket)
				after := time.Now()
				// Refill since the refused take, at 5 × scale per real second.
				low := min(capacity, refill*scale*before.Sub(empty).Seconds())
				high := min(capacity, 1+refill*scale*after.Sub(beforeEmpty).Seconds())
				if got < low-1e-6 || got > high+1e-6 {
					t.Fatalf("%.3fs real after the bucket emptied: %.2f tokens, want %.2f..%.2f (%g/s simulated × %g)",
						before.Sub(empty).Seconds(), got, low, high, refill, scale)
				}
				t.Logf("scale %g: %.2f tokens %.3fs after the bucket emptied (want %.2f..%.2f)",
					scale, got, before.Sub(empty).Seconds(), low, high)
			}
		})
	}
}

// TestThrottleServesFromTheSimsLimiter checks that a Sim's EC2 server
// throttles with the limiter Throttle returns (the one the tests above
// check on its own): a bucket given three tokens and no refill there lets
// exactly three requests through.
func TestThrottleServesFromTheSimsLimiter(t *testing.T) {
	h := start(t, awssim.Config{Scenario: testScenario()})
	h.sim.Throttle().SetSpec("DeleteNetworkInterface", throttle.Spec{Capacity: 3})
	for i := range 3 {
		if err := h.deleteMissing(); throttled(err) {
			t.Fatalf("request %d throttled; the bucket holds 3", i+1)
		}
	}
	if err := h.deleteMissing(); !throttled(err) {
		t.Fatalf("fourth request: %v, want RequestLimitExceeded", err)
	}
}

// TestThrottleBucketsIndependent drains one bucket at a time and checks the
// others still serve, that Attach and Detach share the "mutating" bucket,
// and that unfiltered Describe has its own smaller bucket. No time passes
// on the server's clock, so a drained bucket stays empty however long the
// requests take.
func TestThrottleBucketsIndependent(t *testing.T) {
	h, _, _ := manualHarness(t)
	createTags := func() error {
		_, err := h.ec2.CreateTags(h.ctx, &ec2.CreateTagsInput{Resources: []string{missingENI},
			Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}})
		return err
	}
	detach := func() error {
		_, err := h.ec2.DetachNetworkInterface(h.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String("eni-attach-0123456789abcdef0")})
		return err
	}
	attach := func() error {
		_, err := h.attach(missingENI, "i-0000000000000c5a1", 1)
		return err
	}
	describeAll := func() error {
		_, err := h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{})
		return err
	}
	describeFiltered := func() error {
		_, err := h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{filter("status", "available")}})
		return err
	}
	drain := func(name string, call func() error, capacity int) {
		t.Helper()
		n := 0
		for !throttled(call()) {
			n++
			if n > capacity {
				t.Fatalf("%s: %d calls and no throttle; bucket is %d", name, n, capacity)
			}
		}
		if n != capacity {
			t.Fatalf("%s throttled after %d calls; bucket is %d", name, n, capacity)
		}
	}
	notThrottled := func(name string, call func() error) {
		t.Helper()
		if err := call(); throttled(err) {
			t.Fatalf("%s throttled though its bucket was not drained", name)
		}
	}
	drain("CreateTags", createTags, 100)
	notThrottled("DeleteNetworkInterface", h.deleteMissing)
	notThrottled("Detach", detach)
	notThrottled("DescribeNetworkInterfaces", describeAll)

	drain("Detach", detach, 49) // one token went above
	if err := attach(); !throttled(err) {
		t.Fatalf("attach after draining detach: %v; want RequestLimitExceeded (shared bucket)", err)
	}
	notThrottled("CreateNetworkInterface", func() error {
		_, err := h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0123456789abcdef0")})
		return err
	})

	drain("unfiltered DescribeNetworkInterfaces", describeAll, 49)
	notThrottled("filtered DescribeNetworkInterfaces", describeFiltered)
}
