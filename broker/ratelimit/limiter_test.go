package ratelimit_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/ratelimit/ratelimittest"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestClassOf(t *testing.T) {
	tests := []struct {
		action   string
		filtered bool
		want     ratelimit.Class
	}{
		{"CreateNetworkInterface", false, ratelimit.CreateNetworkInterface},
		{"AssignPrivateIpAddresses", false, ratelimit.AssignPrivateIPAddresses},
		{"UnassignPrivateIpAddresses", true, ratelimit.UnassignPrivateIPAddresses},
		{"DeleteNetworkInterface", false, ratelimit.DeleteNetworkInterface},
		{"ModifyNetworkInterfaceAttribute", false, ratelimit.ModifyNetworkInterfaceAttribute},
		{"CreateTags", false, ratelimit.CreateTags},
		{"AttachNetworkInterface", false, ratelimit.Mutating},
		{"DetachNetworkInterface", true, ratelimit.Mutating},
		{"DescribeNetworkInterfaces", true, ratelimit.Describe},
		{"DescribeNetworkInterfaces", false, ratelimit.DescribeUnfiltered},
		{"DescribeInstances", false, ratelimit.DescribeUnfiltered},
		{"DescribeInstances", true, ratelimit.Describe},
		{"DescribeSubnets", false, ratelimit.Describe},
		{"DescribeInstanceTypes", false, ratelimit.Describe},
		{"RunInstances", false, ratelimit.Class("RunInstances")},
	}
	for _, tt := range tests {
		if got := ratelimit.ClassOf(tt.action, tt.filtered); got != tt.want {
			t.Errorf("ClassOf(%q, %v) = %q, want %q", tt.action, tt.filtered, got, tt.want)
		}
	}
}

func TestBucketScaled(t *testing.T) {
	tests := []struct {
		name         string
		class        ratelimit.Class
		share, scale float64
		want         ratelimit.Bucket
	}{
		{"create full share", ratelimit.CreateNetworkInterface, 1, 1, ratelimit.Bucket{100, 5}},
		{"create half share", ratelimit.CreateNetworkInterface, 0.5, 1, ratelimit.Bucket{50, 2.5}},
		{"mutating half share scaled", ratelimit.Mutating, 0.5, 10, ratelimit.Bucket{25, 25}},
		{"describe unfiltered", ratelimit.DescribeUnfiltered, 1, 1, ratelimit.Bucket{50, 10}},
		{"describe filtered", ratelimit.Describe, 1, 1, ratelimit.Bucket{100, 20}},
		{"create tags", ratelimit.CreateTags, 0.3, 1, ratelimit.Bucket{30, 3}},
		{"size floors", ratelimit.Mutating, 0.33, 1, ratelimit.Bucket{16, 1.65}},
		{"size at least one", ratelimit.Mutating, 0.001, 1, ratelimit.Bucket{1, 0.005}},
		{"zero share means whole", ratelimit.Mutating, 0, 1, ratelimit.Bucket{50, 5}},
		{"share above one means whole", ratelimit.Mutating, 2, 1, ratelimit.Bucket{50, 5}},
		{"negative scale means one", ratelimit.CreateNetworkInterface, 1, -3, ratelimit.Bucket{100, 5}},
		{"unlisted action default", ratelimit.Class("RunInstances"), 1, 1, ratelimit.Bucket{100, 5}},
	}
	for _, tt := range tests {
		got := ratelimit.BucketOf(tt.class).Scaled(tt.share, tt.scale)
		if got.Size != tt.want.Size || !near(got.Refill, tt.want.Refill) {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

// TestRefill checks the refill arithmetic: after emptying a bucket and
// letting time pass, exactly floor(min(size, refill*elapsed)) tokens can be
// taken.
func TestRefill(t *testing.T) {
	tests := []struct {
		name         string
		class        ratelimit.Class
		share, scale float64
		elapsed      time.Duration
		want         int
	}{
		{"nothing yet", ratelimit.CreateNetworkInterface, 1, 1, 0, 0},
		{"just under one token", ratelimit.CreateNetworkInterface, 1, 1, 199 * time.Millisecond, 0},
		{"one token after 200ms", ratelimit.CreateNetworkInterface, 1, 1, 200 * time.Millisecond, 1},
		{"ten seconds", ratelimit.CreateNetworkInterface, 1, 1, 10 * time.Second, 50},
		{"caps at size less the safety token", ratelimit.CreateNetworkInterface, 1, 1, time.Hour, 100 - ratelimit.SafetyTokens},
		{"half share refills half", ratelimit.CreateNetworkInterface, 0.5, 1, 10 * time.Second, 25},
		{"half share caps at half", ratelimit.CreateNetworkInterface, 0.5, 1, time.Hour, 50 - ratelimit.SafetyTokens},
		{"time scale 10", ratelimit.Mutating, 1, 10, time.Second, 50 - ratelimit.SafetyTokens},
		{"time scale 10 capped", ratelimit.Mutating, 1, 10, 2 * time.Second, 50 - ratelimit.SafetyTokens},
		{"describe 20/s", ratelimit.Describe, 1, 1, 1500 * time.Millisecond, 30},
		{"create tags 10/s", ratelimit.CreateTags, 1, 1, 3 * time.Second, 30},
		{"fractional refill", ratelimit.Mutating, 0.5, 1, 3 * time.Second, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := ratelimittest.NewManualClock(epoch)
			l := ratelimit.New(ratelimit.Config{Share: tt.share, TimeScale: tt.scale, Clock: clk})
			size := l.Bucket(tt.class).Size
			for i := 0; i < size; i++ {
				if !l.TryTake(tt.class) {
					t.Fatalf("full bucket refused token %d of %d", i+1, size)
				}
			}
			if l.TryTake(tt.class) {
				t.Fatalf("bucket gave more than its size %d", size)
			}
			clk.Advance(tt.elapsed)
			got := 0
			for l.TryTake(tt.class) {
				got++
			}
			if got != tt.want {
				t.Errorf("after %s: took %d tokens, want %d", tt.elapsed, got, tt.want)
			}
			if s := l.Stats()[tt.class]; s.Taken != int64(size+got) {
				t.Errorf("Stats.Taken = %d, want %d", s.Taken, size+got)
			}
		})
	}
}

func TestDrain(t *testing.T) {
	clk := ratelimittest.NewManualClock(epoch)
	l := ratelimit.New(ratelimit.Config{Clock: clk})
	if !l.TryTake(ratelimit.Mutating) {
		t.Fatal("fresh bucket refused a token")
	}
	l.Drain(ratelimit.Mutating)
	if l.TryTake(ratelimit.Mutating) {
		t.Fatal("drained bucket gave a token")
	}
	clk.Advance(199 * time.Millisecond)
	if l.TryTake(ratelimit.Mutating) {
		t.Fatal("token before 1/refill elapsed")
	}
	clk.Advance(time.Millisecond)
	if !l.TryTake(ratelimit.Mutating) {
		t.Fatal("no token 1/refill after drain")
	}
	// Other buckets are untouched.
	if got := l.Tokens(ratelimit.CreateNetworkInterface); got != 100-ratelimit.SafetyTokens {
		t.Errorf("create bucket has %v tokens after draining Mutating, want %d", got, 100-ratelimit.SafetyTokens)
	}
	if s := l.Stats()[ratelimit.Mutating]; s.Drained != 1 || s.Taken != 2 {
		t.Errorf("stats = %+v, want Drained 1 Taken 2", s)
	}
}

// TestDrainKeepsWaitersTurns: a drain while callers wait on credit must not
// hand their debt back.
func TestDrainKeepsWaitersTurns(t *testing.T) {
	clk := ratelimittest.NewManualClock(epoch)
	l := ratelimit.New(ratelimit.Config{Clock: clk})
	for l.TryTake(ratelimit.Mutating) {
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx, ratelimit.Mutating) }()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	before := l.Tokens(ratelimit.Mutating)
	l.Drain(ratelimit.Mutating)
	if after := l.Tokens(ratelimit.Mutating); after != before || after >= 0 {
		t.Errorf("tokens %v -> %v after drain, want unchanged and negative", before, after)
	}
	clk.Advance(200 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

func TestWaitContext(t *testing.T) {
	clk := ratelimittest.NewManualClock(epoch)
	l := ratelimit.New(ratelimit.Config{Clock: clk})
	for l.TryTake(ratelimit.Mutating) {
	}

	// Done before the call: no token taken.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Wait(ctx, ratelimit.Mutating); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on canceled ctx = %v, want Canceled", err)
	}

	// A deadline before the token would come: refused at once, untaken.
	before := l.Tokens(ratelimit.Mutating)
	dctx, dcancel := context.WithDeadline(context.Background(), epoch.Add(100*time.Millisecond))
	defer dcancel()
	if err := l.Wait(dctx, ratelimit.Mutating); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with short deadline = %v, want DeadlineExceeded", err)
	}
	if after := l.Tokens(ratelimit.Mutating); after != before {
		t.Errorf("refused Wait changed tokens %v -> %v", before, after)
	}

	// Canceled while waiting: returns the context's error.
	wctx, wcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Wait(wctx, ratelimit.Mutating) }()
	if err := clk.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	wcancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait canceled mid-way = %v, want Canceled", err)
	}
	if clk.Pending() != 0 {
		t.Errorf("canceled Wait left %d timers", clk.Pending())
	}
	if s := l.Stats()[ratelimit.Mutating]; s.Canceled != 1 || s.Taken != 50-ratelimit.SafetyTokens {
		t.Errorf("stats = %+v, want Canceled 1, Taken %d", s, 50-ratelimit.SafetyTokens)
	}
}

// TestWaitNeverExceedsBucket runs many goroutines hammering Wait while a
// manual clock advances in small steps, records when each call got through,
// and checks every window [a, b] of the simulated interval: no more than
// size + refill*(b-a) calls may pass, exactly EC2's bucket rule. It also
// checks the limiter isn't wastefully slow: over the whole interval it
// passes all but one token's worth of what the bucket allows.
func TestWaitNeverExceedsBucket(t *testing.T) {
	for _, tc := range []struct {
		name         string
		share, scale float64
		workers      int
		step         time.Duration
		steps        int
	}{
		{"full share", 1, 1, 8, 37 * time.Millisecond, 400},
		{"half share scaled", 0.5, 10, 5, 7 * time.Millisecond, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := ratelimittest.NewManualClock(epoch)
			l := ratelimit.New(ratelimit.Config{Share: tc.share, TimeScale: tc.scale, Clock: clk})
			b := l.Bucket(ratelimit.Mutating)

			ctx, cancel := context.WithCancel(context.Background())
			var (
				mu    sync.Mutex
				times []time.Duration
				wg    sync.WaitGroup
			)
			for i := 0; i < tc.workers; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for l.Wait(ctx, ratelimit.Mutating) == nil {
						mu.Lock()
						times = append(times, clk.Now().Sub(epoch))
						mu.Unlock()
					}
				}()
			}
			for i := 0; i < tc.steps; i++ {
				// Every worker asleep on the clock: nothing runs between
				// a token and its recorded time.
				if err := clk.BlockUntil(context.Background(), tc.workers); err != nil {
					t.Fatal(err)
				}
				clk.Advance(tc.step)
			}
			if err := clk.BlockUntil(context.Background(), tc.workers); err != nil {
				t.Fatal(err)
			}
			cancel()
			wg.Wait()

			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			for i := range times {
				for j := i; j < len(times); j++ {
					n := j - i + 1
					allowed := float64(b.Size) + b.Refill*(times[j]-times[i]).Seconds()
					if float64(n) > allowed+1e-6 {
						t.Fatalf("%d calls in [%s, %s], bucket allows %.2f", n, times[i], times[j], allowed)
					}
				}
			}
			total := time.Duration(tc.steps) * tc.step
			max := float64(b.Size) + b.Refill*total.Seconds()
			if float64(len(times)) < max-1 {
				t.Errorf("only %d calls in %s, bucket allows %.1f", len(times), total, max)
			}
			t.Logf("%d calls in %s of simulated time (bucket %d, %.1f/s)", len(times), total, b.Size, b.Refill)
		})
	}
}
