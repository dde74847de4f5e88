package executor

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/store"
)

// earlyStill divides Gather into how long a demand with pods waiting must
// have been unchanged before planEarly takes it. An agent states the
// changes of a moment together (its demand interval, 100 ms by default),
// so a demand that has stood for a quarter of the gather (250 ms by
// default) is most likely the node's whole burst.
const earlyStill = 4

// gatheringSet is a round's idle nodes whose demand is left to settle
// (gathering). The planner's view of them is built only when the round
// needs it, once: a large cluster's rounds mostly don't.
type gatheringSet struct {
	e     *Engine
	rs    *runState
	snap  *snapshot
	list  []gatheringDemand
	built bool
	view  []gathered
}

// gatheringDemand is one node of a gatheringSet.
type gatheringDemand struct {
	n       store.Node
	d       store.Demand
	settles time.Duration // until it is planned with the rest
}

// gathered is a node whose demand is gathering, as the planner would see
// it.
type gathered struct {
	pn      planner.Node
	updated time.Time     // when the demand last changed
	settles time.Duration // until it is planned with the rest
}

// views returns the planner's view of the set's nodes that could be
// planned now; their unmet status is left for when they are.
func (g *gatheringSet) views() []gathered {
	if g.built {
		return g.view
	}
	g.built = true
	for _, x := range g.list {
		if g.snap.subnetQuarantined(x.n.SubnetID) != nil {
			continue
		}
		pn, why := g.e.plannerNode(g.rs, g.snap, x.n, x.d)
		if why == "" && pn.Pending+pn.WarmShortfall > pn.InFlight {
			g.view = append(g.view, gathered{pn: pn, updated: x.d.UpdatedAt, settles: x.settles})
		}
	}
	return g.view
}

// planEarly plans some demands with pods waiting before their gather ends,
// with tokens the buckets would otherwise lose (overflow), and returns
// when it wants to look again (0: no need).
//
// A bucket holds no more than its size, so while a burst's demands gather
// a full bucket's refill is lost for good, and the burst ends that much
// later. Planning every demand at once would spend those tokens but split
// nodes whose pods are still arriving into two calls, and a second call
// costs a token later, when every token counts. So only the calls the
// buckets would lose before the first demand with pods waiting settles are
// spent now, on the demands that have stood still longest, and of each
// kind (Assign, new ENI) only as many as the policy's mix for every demand
// known so far (planner.Mix) would send anyway. A burst's mix between the
// kinds stays the gathered rounds' to choose.
func (e *Engine) planEarly(rs *runState, snap *snapshot, set *gatheringSet, budgets planner.Budgets, now time.Time) time.Duration {
	lim := e.limiter()
	if lim == nil || e.cfg.PlanPolicy == planner.Naive {
		return 0
	}
	var horizon time.Duration
	for _, x := range set.list {
		if x.d.Pending > 0 {
			horizon = minPositive(horizon, x.settles)
		}
	}
	if horizon <= 0 {
		return 0
	}
	spend := overflow(rs, lim, horizon)
	if spend.Assigns < 1 && spend.Creates < 1 {
		return 0
	}
	held := set.views()
	opt := planner.Options{Policy: e.cfg.PlanPolicy, Buckets: e.buckets(rs)}
	mix := planner.Mix(heldNodes(held), opt)
	spend = planner.Shape{Assigns: min(spend.Assigns, mix.Assigns), Creates: min(spend.Creates, mix.Creates)}
	nodes, shapes, wake := pickEarly(held, spend, now, e.cfg.Gather/earlyStill, opt.Policy)
	if len(nodes) == 0 {
		return wake
	}
	opt.Shapes = shapes
	actions, retry := e.carryOut(rs, snap, planner.MakeWith(nodes, budgets, opt), budgets)
	for _, a := range actions {
		delete(rs.wanting, a.InstanceID) // a later change gathers afresh
	}
	e.count(func(s *Stats) { s.Early += int64(len(actions)) })
	if retry > 0 {
		wake = minPositive(wake, retry)
	}
	return wake
}

// overflow is how many calls of each kind (Assigns; new ENIs, each a
// Create, an Attach and a Modify) the buckets could send now from tokens
// they would otherwise lose within horizon: what they hold, less what
// admitted actions will take, plus their refill over horizon, beyond their
// size, to the nearest whole call.
//
// Rounded down, the part of a token left over was lost: the bucket, full
// again before horizon, sat full until the gathered calls asked, up to a
// call's refill every burst (0.4 s at half of EC2's Attach bucket). A call
// more is spent once over half its token would be lost; it is a call the
// gathered plan would send anyway, so the cost is only the small chance
// that its node's demand was not yet whole.
func overflow(rs *runState, lim *ratelimit.Limiter, horizon time.Duration) planner.Shape {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	over := func(action string) int {
		c := ratelimit.ClassOf(action, true)
		b := lim.Bucket(c)
		n := lim.Tokens(c) - float64(rs.notAsked(c)) + b.Refill*horizon.Seconds() - float64(b.Size)
		return max(int(math.Round(n)), 0)
	}
	return planner.Shape{
		Assigns: over(planner.CallAssign),
		Creates: min(over(planner.CallCreate), over(planner.CallAttach), over(planner.CallModify)),
	}
}

// pickEarly chooses which of the held demands with pods waiting to plan
// early, and in which shape, within spend: the demands unchanged for at
// least still, longest first (ties: InstanceID), each in the shape of its
// own (planner.Shapes; FewestCalls' only, unless the policy is TimeOptimal)
// that fits in what is left to spend and leaves the most of both kinds,
// so the kinds are spent alike. wake is when the next demand that is not
// yet still will be (0: none).
func pickEarly(held []gathered, spend planner.Shape, now time.Time, still time.Duration, policy planner.Policy) ([]planner.Node, map[string]planner.Shape, time.Duration) {
	order := slices.Clone(held)
	slices.SortFunc(order, func(a, b gathered) int {
		return cmp.Or(a.updated.Compare(b.updated), cmp.Compare(a.pn.InstanceID, b.pn.InstanceID))
	})
	var nodes []planner.Node
	shapes := map[string]planner.Shape{}
	var wake time.Duration
	for _, g := range order {
		if spend.Assigns < 1 && spend.Creates < 1 {
			break
		}
		if g.pn.Pending <= 0 {
			continue
		}
		if age := now.Sub(g.updated); age < still {
			wake = minPositive(wake, still-age)
			continue
		}
		options := planner.Shapes(g.pn)
		if policy != planner.TimeOptimal {
			options = options[:1]
		}
		best, ok := fittest(options, spend)
		if !ok {
			continue
		}
		spend.Assigns -= best.Assigns
		spend.Creates -= best.Creates
		shapes[g.pn.InstanceID] = best
		nodes = append(nodes, g.pn)
	}
	return nodes, shapes, wake
}

// fittest is the shape of options, with at least one call, that fits in
// spend and leaves the most of both kinds (ties: the earlier).
func fittest(options []planner.Shape, spend planner.Shape) (planner.Shape, bool) {
	var best planner.Shape
	left, found := 0, false
	for _, sh := range options {
		if sh.Assigns+sh.Creates == 0 || sh.Assigns > spend.Assigns || sh.Creates > spend.Creates {
			continue
		}
		if l := min(spend.Assigns-sh.Assigns, spend.Creates-sh.Creates); !found || l > left {
			best, left, found = sh, l, true
		}
	}
	return best, found
}

// anyChoice reports whether any of the nodes can be served in more than one
// shape. When none can, the demands still gathering change nothing in a
// plan of them (the balance moves only nodes with a choice, and those get
// no action), so their view need not be built: with secondary IPs a
// burst's nodes each have one shape. m keeps each node's answer between
// rounds (nil: none kept).
func anyChoice(nodes []planner.Node, m nodeMemo) bool {
	return slices.ContainsFunc(nodes, m.hasChoice)
}

// heldNodes is the planner's view of the held demands.
func heldNodes(held []gathered) []planner.Node {
	out := make([]planner.Node, len(held))
	for i, g := range held {
		out[i] = g.pn
	}
	return out
}
