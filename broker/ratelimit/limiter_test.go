package ratelimit

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestClassOf(t *testing.T) {
	tests := []struct {
		action   string
		filtered bool
		want     Class
	}{
		{"CreateNetworkInterface", false, CreateNetworkInterface},
		{"AssignPrivateIpAddresses", false, AssignPrivateIPAddresses},
		{"UnassignPrivateIpAddresses", true, UnassignPrivateIPAddresses},
		{"DeleteNetworkInterface", false, DeleteNetworkInterface},
		{"ModifyNetworkInterfaceAttribute", false, ModifyNetworkInterfaceAttribute},
		{"CreateTags", false, CreateTags},
		{"AttachNetworkInterface", false, Mutating},
		{"DetachNetworkInterface", true, Mutating},
		{"DescribeNetworkInterfaces", true, Describe},
		{"DescribeNetworkInterfaces", false, DescribeUnfiltered},
		{"DescribeInstances", false, DescribeUnfiltered},
		{"DescribeInstances", true, Describe},
		{"DescribeSubnets", false, Describe},
		{"DescribeInstanceTypes", false, Describe},
		{"RunInstances", false, Class("RunInstances")},
	}
	for _, tt := range tests {
		if got := ClassOf(tt.action, tt.filtered); got != tt.want {
			t.Errorf("ClassOf(%q, %v) = %q, want %q", tt.action, tt.filtered, got, tt.want)
		}
	}
}

func TestBucketScaled(t *testing.T) {
	tests := []struct {
		name         string
		class        Class
		share, scale float64
		want         Bucket
	}{
		{"create full share", CreateNetworkInterface, 1, 1, Bucket{100, 5}},
		{"create half share", CreateNetworkInterface, 0.5, 1, Bucket{50, 2.5}},
		{"mutating half share scaled", Mutating, 0.5, 10, Bucket{25, 25}},
		{"describe unfiltered", DescribeUnfiltered, 1, 1, Bucket{50, 10}},
		{"describe filtered", Describe, 1, 1, Bucket{100, 20}},
		{"create tags", CreateTags, 0.3, 1, Bucket{30, 3}},
		{"size floors", Mutating, 0.33, 1, Bucket{16, 1.65}},
		{"size at least one", Mutating, 0.001, 1, Bucket{1, 0.005}},
		{"zero share means whole", Mutating, 0, 1, Bucket{50, 5}},
		{"share above one means whole", Mutating, 2, 1, Bucket{50, 5}},
		{"negative scale means one", CreateNetworkInterface, 1, -3, Bucket{100, 5}},
		{"unlisted action default", Class("RunInstances"), 1, 1, Bucket{100, 5}},
	}
	for _, tt := range tests {
		got := BucketOf(tt.class).Scaled(tt.share, tt.scale)
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
		class        Class
		share, scale float64
		elapsed      time.Duration
		want         int
	}{
		{"nothing yet", CreateNetworkInterface, 1, 1, 0, 0},
		{"just under one token", CreateNetworkInterface, 1, 1, 199 * time.Millisecond, 0},
		{"one token after 200ms", CreateNetworkInterface, 1, 1, 200 * time.Millisecond, 1},
		{"ten seconds", CreateNetworkInterface, 1, 1, 10 * time.Second, 50},
		{"caps at size less the safety token", CreateNetworkInterface, 1, 1, time.Hour, 100 - SafetyTokens},
		{"half share refills half", CreateNetworkInterface, 0.5, 1, 10 * time.Second, 25},
		{"half share caps at half", CreateNetworkInterface, 0.5, 1, time.Hour, 50 - SafetyTokens},
		{"time scale 10", Mutating, 1, 10, time.Second, 50 - SafetyTokens},
		{"time scale 10 capped", Mutating, 1, 10, 2 * time.Second, 50 - SafetyTokens},
		{"describe 20/s", Describe, 1, 1, 1500 * time.Millisecond, 30},
		{"create tags 10/s", CreateTags, 1, 1, 3 * time.Second, 30},
		{"fractional refill", Mutating, 0.5, 1, 3 * time.Second, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := NewManualClock(epoch)
			l := New(Config{Share: tt.share, TimeScale: tt.scale, Clock: clk})
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
	clk := NewManualClock(epoch)
	l := New(Config{Clock: clk})
	if !l.TryTake(Mutating) {
		t.Fatal("fresh bucket refused a token")
	}
	l.Drain(Mutating)
	if l.TryTake(Mutating) {
		t.Fatal("drained bucket gave a token")
	}
	clk.Advance(199 * time.Millisecond)
	if l.TryTake(Mutating) {
		t.Fatal("token before 1/refill elapsed")
	}
	clk.Advance(time.Millisecond)
	if !l.TryTake(Mutating) {
		t.Fatal("no token 1/refill after drain")
	}
	// Other buckets are untouched.
	if got := l.Tokens(CreateNetworkInterface); got != 100-SafetyTokens {
		t.Errorf("create bucket has %v tokens after draining Mutating, want %d", got, 100-SafetyTokens)
	}
	if s := l.Stats()[Mutating]; s.Drained != 1 || s.Taken != 2 {
		t.Errorf("stats = %+v, want Drained 1 Taken 2", s)
	}
}

// TestDrainKeepsWaitersTurns: a drain while callers wait on credit must not
// hand their debt back.
func TestDrainKeepsWaitersTurns(t *testing.T) {
	clk := NewManualClock(epoch)
	l := New(Config{Clock: clk})
	for l.TryTake(Mutating) {
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx, Mutating) }()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	before := l.Tokens(Mutating)
	l.Drain(Mutating)
	if after := l.Tokens(Mutating); after != before || after >= 0 {
		t.Errorf("tokens %v -> %v after drain, want unchanged and negative", before, after)
	}
	clk.Advance(200 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

func TestWaitContext(t *testing.T) {
	clk := NewManualClock(epoch)
	l := New(Config{Clock: clk})
	for l.TryTake(Mutating) {
	}

	// Done before the call: no token taken.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Wait(ctx, Mutating); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on canceled ctx = %v, want Canceled", err)
	}

	// A deadline before the token would come: refused at once, untaken.
	before := l.Tokens(Mutating)
	dctx, dcancel := context.WithDeadline(context.Background(), epoch.Add(100*time.Millisecond))
	defer dcancel()
	if err := l.Wait(dctx, Mutating); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with short deadline = %v, want DeadlineExceeded", err)
	}
	if after := l.Tokens(Mutating); after != before {
		t.Errorf("refused Wait changed tokens %v -> %v", before, after)
	}

	// Canceled while waiting: returns the context's error.
	wctx, wcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Wait(wctx, Mutating) }()
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
	if s := l.Stats()[Mutating]; s.Canceled != 1 || s.Taken != 50-SafetyTokens {
		t.Errorf("stats = %+v, want Canceled 1, Taken %d", s, 50-SafetyTokens)
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
			clk := NewManualClock(epoch)
			l := New(Config{Share: tc.share, TimeScale: tc.scale, Clock: clk})
			b := l.Bucket(Mutating)

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
					for l.Wait(ctx, Mutating) == nil {
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
