package planner

import (
	"fmt"
	"math"
)

// Policy says what a plan makes least when a node's demand can be met in
// more than one way: by filling the ENIs it has (one
// AssignPrivateIpAddresses each) or by creating new ENIs already filled
// (CreateNetworkInterface, AttachNetworkInterface and
// ModifyNetworkInterfaceAttribute each). The two ways draw on different EC2
// token buckets.
type Policy int

const (
	// TimeOptimal chooses, node by node, between filling existing ENIs and
	// creating new ones so that the Assign bucket and the buckets of a new
	// ENI's calls drain together and the demand is met as early as the
	// buckets allow. It may spend more calls than FewestCalls: a node that
	// one Assign could serve may get a new ENI (three calls) instead.
	TimeOptimal Policy = iota + 1
	// FewestCalls fills the ENIs a node has first and creates ENIs only for
	// what they cannot hold: the fewest calls, one bucket at a time.
	FewestCalls
	// Naive is a yardstick, not a policy to run a cluster with: it plans
	// as a simple central allocator would, each node on its own in node
	// order, first fit on its ENIs in device-index order, and a new ENI
	// created empty, attached, and filled by a later Assign (makeNaive).
	// The executor's token buckets still pace its calls; what it lacks is
	// the planner. The burst benchmark runs it to show what the planner
	// contributes.
	Naive
)

func (p Policy) String() string {
	switch p {
	case TimeOptimal:
		return "time-optimal"
	case FewestCalls:
		return "fewest-calls"
	case Naive:
		return "naive"
	}
	return fmt.Sprintf("policy(%d)", int(p))
}

// ParsePolicy parses a policy as String spells it.
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "time-optimal":
		return TimeOptimal, nil
	case "fewest-calls":
		return FewestCalls, nil
	case "naive":
		return Naive, nil
	}
	return 0, fmt.Errorf("unknown plan policy %q (want time-optimal or fewest-calls; naive only for comparison)", s)
}

// Bucket is one EC2 token bucket as the planner sees it when it plans.
type Bucket struct {
	// Tokens is what the bucket holds now; negative while calls already
	// wait for tokens on credit.
	Tokens float64
	// Refill is tokens per second; the planner only compares times, so any
	// time scale does as long as every bucket uses the same.
	Refill float64
	// Queued is the calls already committed to the bucket that have not
	// yet asked it for a token (actions planned and not yet started, and
	// the later calls of new ENIs under way).
	Queued int
}

// done returns when the last of n more calls could go out of b: the calls
// up to its tokens at once, the rest at its refill rate. With n = 0 it is
// when the calls already committed are out.
func (b Bucket) done(n int) float64 {
	need := float64(b.Queued+n) - b.Tokens
	switch {
	case need <= 0:
		return 0
	case b.Refill <= 0:
		return math.Inf(1)
	}
	return need / b.Refill
}

// Buckets are the EC2 buckets a plan's calls draw from: Assign for
// AssignPrivateIpAddresses; Create, Attach and Modify for the three calls of
// a new ENI (Attach is the bucket AttachNetworkInterface shares with
// DetachNetworkInterface).
type Buckets struct {
	Assign, Create, Attach, Modify Bucket
	// NewENILag is how much later than an Assign's addresses a new ENI's
	// reach the node once its calls are out, in the buckets' time unit:
	// the Attach taking effect and the instance seeing the ENI before the
	// node can set it up. TimeOptimal ends the new ENIs that much before
	// the Assigns, so both reach the nodes together.
	NewENILag float64
}

// known reports whether every bucket refills, which TimeOptimal needs.
func (b Buckets) known() bool {
	return b.Assign.Refill > 0 && b.Create.Refill > 0 && b.Attach.Refill > 0 && b.Modify.Refill > 0
}

// assignsDone is when a more Assigns could be out.
func (b Buckets) assignsDone(a int) float64 { return b.Assign.done(a) }

// createsDone is when c more new ENIs could be created, attached and
// modified and reach their nodes: each of the three buckets must pass c
// calls, and the k-th call of one can go no earlier than the k-th of the
// one before, so the slowest decides; NewENILag comes after it.
func (b Buckets) createsDone(c int) float64 {
	t := max(b.Create.done(c), b.Attach.done(c), b.Modify.done(c))
	if c > 0 || b.Create.Queued+b.Attach.Queued > 0 {
		t += b.NewENILag
	}
	return t
}

// Options are how Make plans.
type Options struct {
	// Policy is FewestCalls when zero.
	Policy Policy
	// Buckets are the buckets' state for TimeOptimal. When a bucket's
	// Refill is unknown (zero), TimeOptimal plans as FewestCalls.
	Buckets Buckets
	// Shapes fixes the shape of the nodes it names (by InstanceID), where
	// the caller chose it against more demand than the plan's: each such
	// node is planned in that shape and the policy chooses only the
	// others'. A shape that is not one of the node's (Shapes) is ignored.
	Shapes map[string]Shape
	// Expected is demand known but not planned now (nodes whose demand is
	// still gathering): TimeOptimal balances the buckets over it and the
	// plan's nodes together, and plans it nothing.
	Expected []Node
	// Balance, when set, is the balance struck beforehand over a larger
	// set of nodes (Balanced) that this plan's nodes are part of: each
	// node is planned in the shape it was given there, and the policy
	// strikes no balance of its own (Shapes and Expected were Balanced's
	// to use).
	Balance *Balance
}
