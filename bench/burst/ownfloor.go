package burst

import (
	"strings"
	"time"

	"github.com/allotnet/allot/bench/lowerbound"
)

// floorTerm is one thing that keeps a system from finishing sooner: its
// name and the simulated time it alone needs.
type floorTerm struct {
	by  string
	sim time.Duration
}

// ownFloor is the shortest time a system could have taken with the calls it
// chose to make: the EC2 buckets' floor for the calls it sent that were
// not throttled (mutating calls chained as lowerbound.LowerBound chains
// them, each Describe action alone in its own bucket, as EC2 and awssim's
// default model keep them), at the variant's share, or a term of the
// system's own pacing (a client-side limiter, a pool loop), whichever is
// longest. It separates what a system's call pattern costs from what it
// loses to throttling and retries: completion over the problem's floor is
// both; completion over this floor is the loss alone.
func ownFloor(calls, throttled map[string]int64, share float64, terms ...floorTerm) (time.Duration, string) {
	mutating := map[string]int{}
	best := floorTerm{by: "EC2 buckets"}
	for a, n := range calls {
		sent := int(n - throttled[a])
		if sent <= 0 {
			continue
		}
		if strings.HasPrefix(a, "Describe") {
			if d := lowerbound.LowerBound(map[string]int{a: sent}, share, 1); d > best.sim {
				best.sim = d
			}
			continue
		}
		mutating[a] = sent
	}
	if d := lowerbound.LowerBound(mutating, share, 1); d > best.sim {
		best.sim = d
	}
	for _, t := range terms {
		if t.sim > best.sim {
			best = t
		}
	}
	return best.sim, best.by
}

// loopTerm is a per-node loop's floor: a node whose pool grew k times in
// the burst, at most once per period, needs (k-1) periods after its first
// growth.
func loopTerm(by string, period time.Duration, before, after []int64) floorTerm {
	var k int64
	for i := range after {
		if i < len(before) {
			k = max(k, after[i]-before[i])
		}
	}
	if k <= 1 {
		return floorTerm{by: by}
	}
	return floorTerm{by: by, sim: time.Duration(k-1) * period}
}

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
