package burst

import (
	"testing"
	"time"
)

// TestOwnFloor checks the own call-pattern floor: throttled calls are not
// counted, each Describe action has its own bucket, and a pacing term wins
// when it is longer.
func TestOwnFloor(t *testing.T) {
	// 600 Assigns sent, 100 of them throttled: 500 accepted through a
	// bucket of 100 refilled at 5/s is 80 s.
	calls := map[string]int64{"AssignPrivateIpAddresses": 600, "DescribeSubnets": 140, "DescribeInstances": 140}
	thr := map[string]int64{"AssignPrivateIpAddresses": 100}
	d, by := ownFloor(calls, thr, 1)
	if d != 80*time.Second || by != "EC2 buckets" {
		t.Errorf("ownFloor = %s by %q, want 80s by EC2 buckets", d, by)
	}
	// Two Describe actions of 140 each fit their own buckets (100 + 20/s):
	// 2 s, not the 9 s one shared bucket would give.
	d, _ = ownFloor(map[string]int64{"DescribeSubnets": 140, "DescribeInstances": 140}, nil, 1)
	if d != 2*time.Second {
		t.Errorf("describes alone: %s, want 2s", d)
	}
	loop := loopTerm("loop", 5*time.Second, []int64{1, 2}, []int64{4, 3})
	if loop.sim != 10*time.Second {
		t.Errorf("loopTerm = %s, want 10s (3 growths on one node)", loop.sim)
	}
	if d, by := ownFloor(calls, thr, 1, floorTerm{by: "limiter", sim: 2 * time.Minute}); d != 2*time.Minute || by != "limiter" {
		t.Errorf("with a longer term: %s by %q", d, by)
	}
}
