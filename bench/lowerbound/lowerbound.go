// Package lowerbound says how fast a burst could possibly be served: the EC2
// calls a plan costs, and the shortest time a client holding a share of
// EC2's token buckets can send them. The burst benchmark and the executor's
// burst test measure the broker against it.
package lowerbound

import (
	"math"
	"sort"
	"time"

	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/ratelimit"
)

// MinCalls returns the EC2 calls a plan costs, by action name: one
// AssignPrivateIpAddresses per Assign; one CreateNetworkInterface,
// AttachNetworkInterface and ModifyNetworkInterfaceAttribute per
// CreateAttach. Actions absent from the plan are absent from the map.
func MinCalls(plan planner.Plan) map[string]int {
	calls := map[string]int{}
	for _, a := range plan.Actions {
		switch a.Kind {
		case planner.Assign:
			calls[planner.CallAssign]++
		case planner.CreateAttach:
			calls[planner.CallCreate]++
			calls[planner.CallAttach]++
			calls[planner.CallModify]++
		}
	}
	return calls
}

// LowerBound returns the shortest time in which a client holding the given
// share of EC2's token buckets (docs/architecture.md, "EC2's limits"), at the given time scale, can
// send the given calls (by action name, as MinCalls returns them), in wall
// time at that scale.
//
// The model: every bucket starts full; a call takes one token and costs no
// time beyond waiting for it; the k-th AttachNetworkInterface can't be sent
// before the k-th CreateNetworkInterface (it needs the ENI's ID), nor the
// k-th ModifyNetworkInterfaceAttribute before the k-th Attach (it needs the
// attachment ID); everything else is independent. Each bucket serves its
// calls in the order they become sendable, each as early as its bucket
// allows, which makes every k-th call of every chain as early as it can be,
// so the last one is a true lower bound for these counts. Detach calls
// (never planned, but sharing the Attach bucket) are sendable at once and
// are put ahead of the Attaches; with Detaches in the counts the result is a
// close estimate rather than a strict bound. Network and EC2 latency, and the time
// nodes need to ask, are not in the model: a measured run must come out
// above this, and how far above is the overhead.
func LowerBound(calls map[string]int, share, timeScale float64) time.Duration {
	return LowerBoundLag(calls, share, timeScale, 0)
}

// LowerBoundLag is LowerBound with a new ENI's addresses usable only lag
// (simulated time) after its Attach went out, as when the instance sees an
// attach that much late (IMDS lags EC2, and a node needs IMDS to set up a
// new ENI): the burst cannot end before the last Attach plus lag. Every
// other call is timed as in LowerBound, so it is never below LowerBound of
// the same calls, and with lag 0 it is LowerBound.
func LowerBoundLag(calls map[string]int, share, timeScale float64, lag time.Duration) time.Duration {
	return lowerBound(calls, func(c ratelimit.Class) ratelimit.Bucket {
		return ratelimit.BucketOf(c).Scaled(share, timeScale)
	}, lag.Seconds()/timeScale)
}

func lowerBound(calls map[string]int, bucketOf func(ratelimit.Class) ratelimit.Bucket, lag float64) time.Duration {
	// release[class] lists when each call of that class becomes sendable;
	// chained calls are filled in once their predecessors are scheduled.
	release := map[ratelimit.Class][]float64{}
	for action, n := range calls {
		switch action {
		case planner.CallAttach, planner.CallModify:
			continue // chained below
		}
		c := ratelimit.ClassOf(action, true)
		for i := 0; i < n; i++ {
			release[c] = append(release[c], 0)
		}
	}
	var end float64
	sendAll := func(c ratelimit.Class) []float64 {
		sent := send(bucketOf(c), release[c])
		if len(sent) > 0 {
			end = math.Max(end, sent[len(sent)-1])
		}
		delete(release, c)
		return sent
	}

	creates := sendAll(ratelimit.ClassOf(planner.CallCreate, true))
	mutating := ratelimit.ClassOf(planner.CallAttach, true)
	detaches := len(release[mutating])
	for k := 0; k < calls[planner.CallAttach]; k++ {
		r := 0.0
		if k < len(creates) {
			r = creates[k]
		}
		release[mutating] = append(release[mutating], r)
	}
	// Detaches (released at 0) sort ahead of every chained Attach, so the
	// Attaches are the tail of the sorted sends.
	attaches := sendAll(mutating)[detaches:]
	if len(attaches) > 0 {
		end = math.Max(end, attaches[len(attaches)-1]+lag)
	}

	modify := ratelimit.ClassOf(planner.CallModify, true)
	for k := 0; k < calls[planner.CallModify]; k++ {
		r := 0.0
		if k < len(attaches) {
			r = attaches[k]
		}
		release[modify] = append(release[modify], r)
	}
	sendAll(modify)

	classes := make([]string, 0, len(release))
	for c := range release {
		classes = append(classes, string(c))
	}
	sort.Strings(classes)
	for _, c := range classes {
		sendAll(ratelimit.Class(c))
	}
	return time.Duration(math.Round(end * float64(time.Second)))
}

// send returns when each call goes out (seconds from the start) through a
// bucket that starts full, serving calls in release order as early as a
// token allows. The result is sorted.
func send(b ratelimit.Bucket, release []float64) []float64 {
	rel := append([]float64(nil), release...)
	sort.Float64s(rel)
	out := make([]float64, 0, len(rel))
	size := float64(b.Size)
	tokens, last := size, 0.0
	for _, r := range rel {
		t := math.Max(r, last)
		tokens = math.Min(size, tokens+b.Refill*(t-last))
		if tokens < 1 {
			t += (1 - tokens) / b.Refill
			tokens = 1
		}
		tokens--
		last = t
		out = append(out, t)
	}
	return out
}
