package lowerbound

import (
	"math"
	"time"

	"github.com/allotnet/allot/broker/planner"
)

// FewestCalls returns the fewest-calls floor of the nodes' demand: the
// calls of the planner's FewestCalls plan (no budget in the way) and
// LowerBound of them at the given share and time scale.
func FewestCalls(nodes []planner.Node, share, timeScale float64) (time.Duration, map[string]int) {
	budgets := planner.Budgets{}
	for _, n := range nodes {
		budgets[n.SubnetID] = math.MaxInt32
		for _, e := range n.ENIs {
			budgets[e.SubnetID] = math.MaxInt32
		}
	}
	calls := MinCalls(planner.Make(nodes, budgets))
	return LowerBound(calls, share, timeScale), calls
}

// TimeOptimal returns the time-optimal floor of the nodes' demand: the
// least LowerBound, over every way of meeting each node's demand
// (planner.Shapes), of the calls that way costs, with those calls (ties:
// the fewest calls). No plan can end earlier (docs/benchmarks.md proves
// it): a node's calls always include one of its shapes' Assigns and new
// ENIs, and LowerBound only grows with the calls.
//
// The search is exact. The Assign bucket and the new ENIs' buckets are
// independent, so of all the ways with the same number of Assigns the one
// with the fewest new ENIs ends first; a knapsack over the nodes finds, for
// every total of Assigns, the fewest new ENIs that goes with it, and each
// total is then timed by LowerBound. Its cost grows with the nodes times
// the total of Assigns, small for any fleet a burst runs.
func TimeOptimal(nodes []planner.Node, share, timeScale float64) (time.Duration, map[string]int) {
	return TimeOptimalLag(nodes, share, timeScale, 0)
}

// TimeOptimalLag is TimeOptimal with a new ENI's addresses usable only lag
// after its Attach (LowerBoundLag): the floor of any plan when the nodes
// see a new ENI that much later than EC2 attached it. The search is the
// same and as exact: LowerBoundLag too only grows with the calls, so of
// the ways with the same Assigns the one with the fewest new ENIs still
// ends first.
func TimeOptimalLag(nodes []planner.Node, share, timeScale float64, lag time.Duration) (time.Duration, map[string]int) {
	fewest := fewestCreates(nodes)
	best, bestCalls := time.Duration(math.MaxInt64), map[string]int{}
	for a, c := range fewest {
		if c < 0 {
			continue
		}
		calls := shapeCalls(a, c)
		lb := LowerBoundLag(calls, share, timeScale, lag)
		if lb < best || lb == best && a+3*c < total(bestCalls) {
			best, bestCalls = lb, calls
		}
	}
	return best, bestCalls
}

// fewestCreates returns, for every total of Assigns a (the index), the
// fewest new ENIs that meet every node's demand with exactly a Assigns, or
// -1 when no choice of shapes adds up to a.
func fewestCreates(nodes []planner.Node) []int {
	best := []int{0}
	for _, n := range nodes {
		shapes := planner.Shapes(n)
		most := 0
		for _, s := range shapes {
			most = max(most, s.Assigns)
		}
		next := make([]int, len(best)+most)
		for i := range next {
			next[i] = -1
		}
		for a, c := range best {
			if c < 0 {
				continue
			}
			for _, s := range shapes {
				if x := next[a+s.Assigns]; x < 0 || c+s.Creates < x {
					next[a+s.Assigns] = c + s.Creates
				}
			}
		}
		best = next
	}
	return best
}

// shapeCalls is the calls of a Assigns and c new ENIs.
func shapeCalls(a, c int) map[string]int {
	calls := map[string]int{}
	if a > 0 {
		calls[planner.CallAssign] = a
	}
	if c > 0 {
		calls[planner.CallCreate], calls[planner.CallAttach], calls[planner.CallModify] = c, c, c
	}
	return calls
}

func total(calls map[string]int) int {
	n := 0
	for _, c := range calls {
		n += c
	}
	return n
}
