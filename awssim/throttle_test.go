package awssim_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/allotnet/allot/awssim"
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

// TestThrottleBurstAndRefill shows DeleteNetworkInterface's bucket (100
// tokens, 5/s simulated) at two time scales: a burst gets 100 requests
// through (plus what refills during the burst) and then
// RequestLimitExceeded; hammering an empty bucket for a second gets
// through 5 × scale requests, within ±25%.
func TestThrottleBurstAndRefill(t *testing.T) {
	for _, scale := range []float64{10, 40} {
		t.Run(fmt.Sprintf("scale=%g", scale), func(t *testing.T) {
			h := start(t, awssim.Config{Scenario: testScenario(), TimeScale: scale})
			rate := 5 * scale // tokens per real second

			// Burst.
			begin := time.Now()
			ok, limited := 0, 0
			for range 160 {
				err := h.deleteMissing()
				switch {
				case throttled(err):
					limited++
				case err != nil:
					ok++ // NotFound: the request got through the bucket
				default:
					t.Fatal("delete of a missing ENI succeeded")
				}
			}
			refilled := rate * time.Since(begin).Seconds()
			if ok < 100 || float64(ok) > 100+refilled+1 {
				t.Fatalf("burst: %d got through; want 100..%.0f (bucket 100 + %.1f refilled)", ok, 100+refilled+1, refilled)
			}
			if limited == 0 {
				t.Fatal("burst of 160: nothing throttled")
			}
			if c := h.sim.Counters()["DeleteNetworkInterface"]; c.Calls != 160 || c.Throttled != int64(limited) || c.Errors != int64(ok) {
				t.Fatalf("counters %+v; want calls 160 throttled %d errors %d", c, limited, ok)
			}

			// Sustained: four clients hammer the empty bucket for a second.
			const window = time.Second
			var through atomic.Int64
			var wg sync.WaitGroup
			begin = time.Now()
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Since(begin) < window {
						if err := h.deleteMissing(); !throttled(err) {
							through.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			want := rate * time.Since(begin).Seconds()
			got := float64(through.Load())
			if got < 0.75*want || got > 1.25*want {
				t.Fatalf("sustained: %.0f requests through in %v; want %.0f ±25%% (refill %.0f/s real)", got, time.Since(begin), want, rate)
			}
			t.Logf("scale %v: burst %d through, sustained %.0f/s vs refill %.0f/s", scale, ok, got/time.Since(begin).Seconds(), rate)
		})
	}
}

// TestThrottleBucketsIndependent drains one bucket at a time and checks the
// others still serve, that Attach and Detach share the "mutating" bucket,
// and that unfiltered Describe has its own smaller bucket.
func TestThrottleBucketsIndependent(t *testing.T) {
	h := start(t, awssim.Config{Scenario: testScenario(), TimeScale: 1})
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
			if n > capacity+10 {
				t.Fatalf("%s: %d calls and no throttle; bucket is %d", name, n, capacity)
			}
		}
		if n < capacity {
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
