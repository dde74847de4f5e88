package throttle

import (
	"math"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim/simclock"
)

func drain(l *Limiter, action string, narrowed bool) int {
	n := 0
	for l.TakeAction(action, narrowed) {
		n++
	}
	return n
}

// TestPerAPIDescribe checks EC2's documented model, the default: each
// Describe action has its own bucket, filtered and unfiltered apart.
func TestPerAPIDescribe(t *testing.T) {
	l := New(simclock.NewManual(time.Unix(0, 0)), nil)
	if n := drain(l, "DescribeSubnets", false); n != 100 {
		t.Fatalf("DescribeSubnets bucket held %d, want 100", n)
	}
	if n := drain(l, "DescribeInstances", true); n != 100 {
		t.Errorf("filtered DescribeInstances after draining DescribeSubnets: %d tokens, want its own 100", n)
	}
	if n := drain(l, "DescribeInstances", false); n != 50 {
		t.Errorf("unfiltered DescribeInstances: %d tokens, want its own 50", n)
	}
	if n := drain(l, "DescribeNetworkInterfaces", false); n != 50 {
		t.Errorf("unfiltered DescribeNetworkInterfaces after DescribeInstances: %d, want its own 50", n)
	}
	if got := l.Tokens("DescribeInstances" + UnfilteredSuffix); got != 0 {
		t.Errorf("Tokens(unfiltered DescribeInstances) = %v, want 0", got)
	}
}

// TestSharedDescribe checks the switch: one bucket for every narrowed
// describe.
func TestSharedDescribe(t *testing.T) {
	l := New(simclock.NewManual(time.Unix(0, 0)), nil)
	l.SetSemantics(Semantics{SharedDescribe: true})
	if n := drain(l, "DescribeSubnets", false); n != 100 {
		t.Fatalf("describe bucket held %d, want 100", n)
	}
	if l.TakeAction("DescribeInstances", true) {
		t.Error("filtered DescribeInstances allowed after DescribeSubnets drained the shared bucket")
	}
	if !l.TakeAction("DescribeInstances", false) {
		t.Error("unfiltered DescribeInstances refused: its bucket is apart")
	}
}

// TestDiscreteRefill checks that tokens come once per whole second from the
// limiter's start, where continuous refill adds them as time passes.
func TestDiscreteRefill(t *testing.T) {
	for _, discrete := range []bool{false, true} {
		clk := simclock.NewManual(time.Unix(0, 0))
		l := New(clk, nil)
		l.SetSemantics(Semantics{DiscreteRefill: discrete})
		drain(l, "CreateNetworkInterface", false)
		clk.Advance(600 * time.Millisecond)
		want := 3.0 // 5/s continuously
		if discrete {
			want = 0
		}
		if got := l.Tokens("CreateNetworkInterface"); math.Abs(got-want) > 1e-9 {
			t.Errorf("discrete=%v: %v tokens 0.6 s after draining, want %v", discrete, got, want)
		}
		clk.Advance(400 * time.Millisecond)
		if got := l.Tokens("CreateNetworkInterface"); math.Abs(got-5) > 1e-9 {
			t.Errorf("discrete=%v: %v tokens 1 s after draining, want 5", discrete, got)
		}
	}
}

// TestTenant checks the other tenant: half of what a bucket holds at once,
// half of every refill after, buckets first used later included.
func TestTenant(t *testing.T) {
	clk := simclock.NewManual(time.Unix(0, 0))
	l := New(clk, nil)
	l.SetTenant(0.5)
	l.SetTenant(0.5) // the same fraction again takes nothing more
	if n := drain(l, "AttachNetworkInterface", false); n != 25 {
		t.Errorf("mutating bucket gave %d with a tenant at half, want 25", n)
	}
	if n := drain(l, "DescribeSubnets", false); n != 50 {
		t.Errorf("a per-API bucket first used with the tenant at work gave %d, want 50", n)
	}
	clk.Advance(2 * time.Second)
	if got := l.Tokens(ClassMutating); math.Abs(got-5) > 1e-9 {
		t.Errorf("mutating bucket 2 s later: %v, want 5 (half of 2 x 5)", got)
	}
	if got := l.TenantTaken()[ClassMutating]; math.Abs(got-30) > 1e-9 {
		t.Errorf("tenant took %v from the mutating bucket, want 25 + 5", got)
	}
	l.SetTenant(0)
	clk.Advance(time.Second)
	if got := l.Tokens(ClassMutating); math.Abs(got-10) > 1e-9 {
		t.Errorf("after the tenant stopped: %v, want 10", got)
	}
}
