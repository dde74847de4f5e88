package lowerbound

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/ratelimit"
)

func TestMinCalls(t *testing.T) {
	plan := planner.Plan{Actions: []planner.Action{
		{Kind: planner.Assign, Count: 3}, {Kind: planner.Assign, Count: 1},
		{Kind: planner.CreateAttach, Count: 14}, {Kind: planner.CreateAttach, Count: 2}, {Kind: planner.CreateAttach, Count: 1},
	}}
	want := map[string]int{planner.CallAssign: 2, planner.CallCreate: 3, planner.CallAttach: 3, planner.CallModify: 3}
	if got := MinCalls(plan); !reflect.DeepEqual(got, want) {
		t.Errorf("MinCalls = %v, want %v", got, want)
	}
	if got := MinCalls(planner.Plan{}); len(got) != 0 {
		t.Errorf("MinCalls(empty) = %v, want empty", got)
	}
	// Every action's Calls() agrees with the per-action count.
	total := 0
	for _, n := range MinCalls(plan) {
		total += n
	}
	sum := 0
	for _, a := range plan.Actions {
		sum += a.Calls()
	}
	if total != sum {
		t.Errorf("MinCalls totals %d calls, planner.Action.Calls sums to %d", total, sum)
	}
}

func TestLowerBound(t *testing.T) {
	chain := func(n int) map[string]int {
		return map[string]int{planner.CallCreate: n, planner.CallAttach: n, planner.CallModify: n}
	}
	tests := []struct {
		name         string
		calls        map[string]int
		share, scale float64
		want         time.Duration
	}{
		{"nothing", nil, 1, 1, 0},
		{"within the burst", map[string]int{planner.CallAssign: 100}, 1, 1, 0},
		{"one past the burst", map[string]int{planner.CallAssign: 101}, 1, 1, 200 * time.Millisecond},
		{"assigns only", map[string]int{planner.CallAssign: 500}, 1, 1, 80 * time.Second},
		{"half share halves burst and rate", map[string]int{planner.CallAssign: 500}, 0.5, 1, 180 * time.Second},
		{"time scale divides", map[string]int{planner.CallAssign: 500}, 1, 10, 8 * time.Second},
		// Attach's bucket (50, 5/s) is smaller than Create's: it decides.
		{"create-attach chain", chain(1500), 1, 1, 290 * time.Second},
		{"chain at half share", chain(1500), 0.5, 1, 590 * time.Second},
		{"independent buckets overlap", map[string]int{planner.CallAssign: 500, planner.CallCreate: 300, planner.CallAttach: 300, planner.CallModify: 300}, 1, 1, 80 * time.Second},
		// Detach shares Attach's bucket.
		{"detaches share the attach bucket", map[string]int{planner.CallAttach: 30, planner.CallDetach: 30}, 1, 1, 2 * time.Second},
		{"describe", map[string]int{"DescribeNetworkInterfaces": 120}, 1, 1, time.Second},
	}
	for _, tt := range tests {
		got := LowerBound(tt.calls, tt.share, tt.scale)
		if d := got - tt.want; d > time.Microsecond || d < -time.Microsecond {
			t.Errorf("%s: LowerBound = %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestLowerBoundPipeline checks the chain with buckets where it matters: a
// roomy Attach bucket can't send an Attach before its Create, nor a Modify
// before its Attach.
func TestLowerBoundPipeline(t *testing.T) {
	buckets := map[ratelimit.Class]ratelimit.Bucket{
		ratelimit.CreateNetworkInterface:          {Size: 1, Refill: 1},
		ratelimit.Mutating:                        {Size: 100, Refill: 100},
		ratelimit.ModifyNetworkInterfaceAttribute: {Size: 100, Refill: 100},
	}
	bucketOf := func(c ratelimit.Class) ratelimit.Bucket { return buckets[c] }
	tests := []struct {
		calls map[string]int
		want  time.Duration
	}{
		// Creates at 0, 1, 2 s; each Attach and Modify right behind.
		{map[string]int{planner.CallCreate: 3, planner.CallAttach: 3, planner.CallModify: 3}, 2 * time.Second},
		// Without the chain the Attaches alone would take no time.
		{map[string]int{planner.CallAttach: 3, planner.CallModify: 3}, 0},
		// Attaches beyond the Creates are not chained.
		{map[string]int{planner.CallCreate: 2, planner.CallAttach: 5}, time.Second},
	}
	for _, tt := range tests {
		if got := lowerBound(tt.calls, bucketOf, 0); got != tt.want {
			t.Errorf("lowerBound(%v) = %s, want %s", tt.calls, got, tt.want)
		}
	}
	// Slow Modify after a fast chain: the Modify bucket is the tail.
	buckets[ratelimit.ModifyNetworkInterfaceAttribute] = ratelimit.Bucket{Size: 1, Refill: 0.5}
	if got := lowerBound(map[string]int{planner.CallCreate: 3, planner.CallAttach: 3, planner.CallModify: 3}, bucketOf, 0); got != 4*time.Second {
		t.Errorf("slow modify: lowerBound = %s, want 4s", got)
	}
}

// c5xlarge is what EC2 says of a c5.xlarge, as the planner sees it.
var c5xlarge = planner.Limits{MaxENIs: 4, IPv4PerENI: 15, PrefixCapable: true}

// burst500 is the 500-node burst: 500 c5.xlarge nodes, each with only its
// primary ENI, 46 pods waiting at once, in one large subnet.
func burst500(mode planner.Mode) []planner.Node {
	nodes := make([]planner.Node, 500)
	for i := range nodes {
		nodes[i] = planner.Node{
			InstanceID:     fmt.Sprintf("i-%04d", i),
			SubnetID:       "subnet-big",
			SecurityGroups: []string{"sg-1"},
			Mode:           mode,
			Limits:         c5xlarge,
			ENIs:           []planner.ENI{{ID: fmt.Sprintf("eni-%04d", i), SubnetID: "subnet-big", Primary: true}},
			Pending:        46,
		}
	}
	return nodes
}

// TestBurst500 shows the call counts and lower bounds of the 500-node burst:
// secondary IPs need the primary ENI's 14 plus three new ENIs (14+14+4) per
// node, prefixes need one Assign of three /28s per node.
func TestBurst500(t *testing.T) {
	tests := []struct {
		mode       planner.Mode
		want       map[string]int
		addresses  int
		lb1, lbHlf time.Duration
	}{
		{planner.SecondaryIP, map[string]int{planner.CallAssign: 500, planner.CallCreate: 1500, planner.CallAttach: 1500, planner.CallModify: 1500},
			500 * 46, 290 * time.Second, 590 * time.Second},
		{planner.Prefix, map[string]int{planner.CallAssign: 500}, 500 * 48, 80 * time.Second, 180 * time.Second},
	}
	for _, tt := range tests {
		nodes := burst500(tt.mode)
		plan := planner.Make(nodes, planner.Budgets{"subnet-big": 65531})
		if len(plan.Unmet) != 0 {
			t.Fatalf("mode %d: unmet %v", tt.mode, plan.Unmet)
		}
		calls := MinCalls(plan)
		if !reflect.DeepEqual(calls, tt.want) {
			t.Errorf("mode %d: calls %v, want %v", tt.mode, calls, tt.want)
		}
		addrs := 0
		for _, a := range plan.Actions {
			addrs += a.Addresses()
			if !a.Urgent {
				t.Errorf("mode %d: non-urgent action %+v in an all-pending burst", tt.mode, a)
			}
		}
		if addrs != tt.addresses {
			t.Errorf("mode %d: %d addresses planned, want %d", tt.mode, addrs, tt.addresses)
		}
		lb1, lbHalf := LowerBound(calls, 1, 1), LowerBound(calls, 0.5, 1)
		if lb1 != tt.lb1 || lbHalf != tt.lbHlf {
			t.Errorf("mode %d: lower bounds %s / %s, want %s / %s", tt.mode, lb1, lbHalf, tt.lb1, tt.lbHlf)
		}
		t.Logf("mode %d: %d actions, calls %v, lower bound %s at 100%% share, %s at 50%%", tt.mode, len(plan.Actions), calls, lb1, lbHalf)
	}
}
