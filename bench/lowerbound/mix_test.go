package lowerbound

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/planner"
)

// burstOf is burst500 with n nodes.
func burstOf(n int, mode planner.Mode) []planner.Node {
	return burst500(mode)[:n]
}

func mix(assigns, creates int) map[string]int {
	return shapeCalls(assigns, creates)
}

// TestFloors checks both floors against hand computations. EC2's buckets:
// Assign, Create and Modify 100 at 5/s, Attach 50 at 5/s; at half share 50
// and 25 at 2.5/s. A node of the prefix burst wants 3 prefixes: one Assign
// on its primary ENI, or one new ENI (Create, Attach, Modify). x Assigns
// are out at (x-100)/5 s; y new ENIs at (y-50)/5 s, since the k-th Attach
// waits for the k-th Create and Attach's bucket is the smaller. The best
// mix has x-100 = y-50.
func TestFloors(t *testing.T) {
	tests := []struct {
		name        string
		nodes       []planner.Node
		share       float64
		fewest      time.Duration
		fewestCalls map[string]int
		optimal     time.Duration
		optCalls    map[string]int
	}{
		// Everything fits in the full buckets: nothing to gain.
		{"10 nodes", burstOf(10, planner.Prefix), 1, 0, mix(10, 0), 0, mix(10, 0)},
		// 150 Assigns take 10 s; 100 Assigns and 50 new ENIs go at once.
		{"150 nodes", burstOf(150, planner.Prefix), 1, 10 * time.Second, mix(150, 0), 0, mix(100, 50)},
		// x+y = 250: x = 150, y = 100, both out at 10 s.
		{"250 nodes", burstOf(250, planner.Prefix), 1, 30 * time.Second, mix(250, 0), 10 * time.Second, mix(150, 100)},
		// (x-50)/2.5 = (y-25)/2.5 at x = 137.5: 138 and 112 end at 35.2 s,
		// as do 137 and 113, with two calls more.
		{"250 nodes, half share", burstOf(250, planner.Prefix), 0.5, 80 * time.Second, mix(250, 0), 35200 * time.Millisecond, mix(138, 112)},
		// x+y = 500: x = 275, y = 225, 35 s instead of 80 s.
		{"500 nodes", burstOf(500, planner.Prefix), 1, 80 * time.Second, mix(500, 0), 35 * time.Second, mix(275, 225)},
		// x = 262.5: 263 and 237 end at 85.2 s.
		{"500 nodes, half share", burstOf(500, planner.Prefix), 0.5, 180 * time.Second, mix(500, 0), 85200 * time.Millisecond, mix(263, 237)},
		// Secondary IPs: 46 addresses need the primary's Assign and three
		// new ENIs on every node, whatever the plan: the floors coincide.
		{"500 nodes, secondary IPs", burstOf(500, planner.SecondaryIP), 1, 290 * time.Second, mix(500, 1500), 290 * time.Second, mix(500, 1500)},
		{"500 nodes, secondary IPs, half share", burstOf(500, planner.SecondaryIP), 0.5, 590 * time.Second, mix(500, 1500), 590 * time.Second, mix(500, 1500)},
	}
	near := func(a, b time.Duration) bool { d := a - b; return d < time.Microsecond && d > -time.Microsecond }
	for _, tt := range tests {
		lb, calls := FewestCalls(tt.nodes, tt.share, 1)
		if !near(lb, tt.fewest) || !reflect.DeepEqual(calls, tt.fewestCalls) {
			t.Errorf("%s: fewest-calls floor %s with %v, want %s with %v", tt.name, lb, calls, tt.fewest, tt.fewestCalls)
		}
		lb, calls = TimeOptimal(tt.nodes, tt.share, 1)
		if !near(lb, tt.optimal) || !reflect.DeepEqual(calls, tt.optCalls) {
			t.Errorf("%s: time-optimal floor %s with %v, want %s with %v", tt.name, lb, calls, tt.optimal, tt.optCalls)
		}
	}
}

// TestTimeOptimalMixedFleet: nodes whose shapes trade differently. Five
// nodes have two ENIs with 5 free slots each and want 8 addresses (two
// Assigns, or one new ENI); five want 3 on their primary (one Assign, or
// one new ENI). With buckets of one token refilled at 1/s, the knapsack
// sees every split; by hand: all Assigns is 15 calls, 14 s; moving the
// two-Assign nodes first, 5 Assigns and 5 new ENIs end at 4 s; one more
// new ENI gives 4 Assigns (3 s) and 6 new ENIs (5 s), worse.
func TestTimeOptimalMixedFleet(t *testing.T) {
	c5 := planner.Limits{MaxENIs: 4, IPv4PerENI: 15}
	var nodes []planner.Node
	for i := range 10 {
		n := planner.Node{InstanceID: fmt.Sprintf("i-%d", i), SubnetID: "s", Mode: planner.SecondaryIP, Limits: c5, Pending: 3,
			ENIs: []planner.ENI{{ID: fmt.Sprintf("eni-%d-0", i), SubnetID: "s", Primary: true}}}
		if i < 5 {
			n.Pending = 8
			n.ENIs = []planner.ENI{{ID: fmt.Sprintf("eni-%d-0", i), SubnetID: "s", Primary: true, Secondary: 9},
				{ID: fmt.Sprintf("eni-%d-1", i), DeviceIndex: 1, SubnetID: "s", Secondary: 9}}
		}
		nodes = append(nodes, n)
	}
	// A share of 0.01 leaves every bucket one token (sizes never go below
	// one) refilled at 0.05/s; a time scale of 20 makes that 1/s.
	lb, calls := TimeOptimal(nodes, 0.01, 20)
	if want := mix(5, 5); !reflect.DeepEqual(calls, want) || lb != 4*time.Second {
		t.Errorf("TimeOptimal = %s with %v, want 4s with %v", lb, calls, want)
	}
	if lb, calls := FewestCalls(nodes, 0.01, 20); lb != 14*time.Second || !reflect.DeepEqual(calls, mix(15, 0)) {
		t.Errorf("FewestCalls = %s with %v, want 14s with 15 Assigns", lb, calls)
	}
}

// TestTimeOptimalLag: the floor when a new ENI's addresses are usable a
// second after its Attach (the instance sees an attach a second late). By
// hand, the prefix burst: x Assigns are out at (x-100)/5 s, y new ENIs'
// addresses usable at (y-50)/5 + 1 s (at half share (x-50)/2.5 and
// (y-25)/2.5 + 1), x + y nodes.
//
//   - 250 nodes: x - y = 55; 153 and 97 end at max(10.6, 10.4) = 10.6 s,
//     as do 152 and 98 (10.4, 10.6) with three calls more.
//   - 100 nodes, half share: x - y = 27.5; 64 and 36 end at max(5.6, 5.4) =
//     5.6 s; 63 and 37 at max(5.2, 5.8) = 5.8 s. Without the lag 5.2 s.
//   - Secondary IPs: every node needs three new ENIs whatever the plan, so
//     the floor is the lag-free one plus the lag past the last Attach.
//   - With no lag it is TimeOptimal.
func TestTimeOptimalLag(t *testing.T) {
	tests := []struct {
		name  string
		nodes []planner.Node
		share float64
		lag   time.Duration
		want  time.Duration
		calls map[string]int
	}{
		{"250 nodes", burstOf(250, planner.Prefix), 1, time.Second, 10600 * time.Millisecond, mix(153, 97)},
		{"100 nodes, half share", burstOf(100, planner.Prefix), 0.5, time.Second, 5600 * time.Millisecond, mix(64, 36)},
		{"100 nodes, half share, no lag", burstOf(100, planner.Prefix), 0.5, 0, 5200 * time.Millisecond, mix(63, 37)},
		// 300 new ENIs: Attaches out at (300-50)/5 = 50 s, then the lag;
		// the 100 Assigns fit in the bucket.
		{"100 nodes, secondary IPs", burstOf(100, planner.SecondaryIP), 1, time.Second, 51 * time.Second, mix(100, 300)},
	}
	near := func(a, b time.Duration) bool { d := a - b; return d < time.Microsecond && d > -time.Microsecond }
	for _, tt := range tests {
		lb, calls := TimeOptimalLag(tt.nodes, tt.share, 1, tt.lag)
		if !near(lb, tt.want) || !reflect.DeepEqual(calls, tt.calls) {
			t.Errorf("%s: TimeOptimalLag = %s with %v, want %s with %v", tt.name, lb, calls, tt.want, tt.calls)
		}
		if lag0, _ := TimeOptimal(tt.nodes, tt.share, 1); lb < lag0 {
			t.Errorf("%s: %s with the lag is below %s without", tt.name, lb, lag0)
		}
	}
	// At a time scale the lag (simulated) shrinks with the buckets' time.
	if lb, _ := TimeOptimalLag(burstOf(250, planner.Prefix), 1, 2, time.Second); !near(lb, 5300*time.Millisecond) {
		t.Errorf("250 nodes at time scale 2: %s, want 5.3s", lb)
	}
}
