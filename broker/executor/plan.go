package executor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// plan runs the planner over the idle nodes with demand and queues its
// actions; the demands still gathering count in the planner's balance
// between the kinds of call (planner.Options.Expected). Then it plans
// early, from tokens a full bucket would lose, some of those (planEarly).
func (e *Engine) plan(rs *runState, snap *snapshot, queued map[string]int64, free func(string) bool, now time.Time) {
	timeOptimal := e.cfg.PlanPolicy == planner.TimeOptimal
	nodes, held, wake := e.plannable(rs, snap, free, now, timeOptimal)
	held.e, held.rs, held.snap = e, rs, snap
	defer func() {
		if wake > 0 {
			rs.wakeIn(wake)
		}
	}()
	budgets := planner.Budgets{}
	for id, sn := range snap.subnets {
		budgets[id] = max(sn.Available()-queued[id], 0)
	}
	if len(nodes.list) > 0 {
		opt := planner.Options{Policy: e.cfg.PlanPolicy, Buckets: e.buckets(rs)}
		choice := timeOptimal && nodes.choice
		if choice {
			opt.Expected = heldNodes(held.views())
		}
		if w := e.planInParts(rs, snap, nodes, budgets, opt, choice); w > 0 {
			wake = minPositive(wake, w)
		}
	}
	if w := e.planEarly(rs, snap, &held, budgets, now); w > 0 {
		wake = minPositive(wake, w)
	}
}

// partMin is the fewest nodes a part of a round's plan holds
// (planInParts).
const partMin = 32

// planInParts plans the nodes a part at a time, those that want the most
// first, and queues each part's actions the buckets admit, until the
// buckets admit no more this round; the nodes left are planned by a later
// round, when tokens are near again. It returns when to try again (0: no
// need).
//
// During a burst of thousands of nodes the buckets admit a few actions a
// round, and planning every node's whole demand to keep those few cost
// each round time in proportion to the cluster. A part is twice the calls
// the buckets admit now (partMin at least), so one part mostly suffices.
// The parts are planned as the whole would be: the balance between the
// kinds of call is struck once over every node (planner.Balanced), each
// node gets the actions it would get in a plan of all, and the order is
// the planner's own (the most addresses for waiting pods first, then the
// largest warm shortfall, ties by InstanceID), so the nodes served first
// are those a plan of all would have had admitted first. Once one kind of
// call has no room left, only the nodes the other kind serves
// (planner.Calls) are planned on. A part's admitted actions come off the
// budgets before the next part is planned.
func (e *Engine) planInParts(rs *runState, snap *snapshot, w *wants, budgets planner.Budgets, opt planner.Options, choice bool) time.Duration {
	lim := e.limiter()
	if lim == nil {
		_, retry := e.planPart(rs, snap, w.all(), budgets, opt)
		return retry
	}
	w.byNeed()
	if choice {
		opt.Balance = planner.Balanced(w.all(), opt)
	}
	var wake time.Duration
	var serves func(assign, create bool) bool
	for w.next < len(w.list) {
		assigns, creates, next := e.room(rs)
		if assigns < 1 && creates < 1 {
			return minPositive(wake, next)
		}
		// Room only shrinks within a round: once the first kind runs out,
		// only the nodes the other kind serves are planned on, sorted out
		// as the parts need them.
		if (assigns < 1 || creates < 1) && serves == nil {
			wake = minPositive(wake, next)
			serves = func(assign, create bool) bool {
				return assign && assigns > 0 || create && creates > 0
			}
		}
		part := w.take(max(2*(assigns+creates), partMin), serves, opt.Balance)
		if len(part) == 0 {
			break
		}
		_, retry := e.planPart(rs, snap, part, budgets, opt)
		if retry > 0 {
			wake = minPositive(wake, retry)
		}
	}
	return wake
}

// planPart plans nodes, notes each one's unmet demand, and queues the
// actions the buckets admit (carryOut).
func (e *Engine) planPart(rs *runState, snap *snapshot, nodes []planner.Node, budgets planner.Budgets, opt planner.Options) ([]planner.Action, time.Duration) {
	p := planner.MakeWith(nodes, budgets, opt)
	for _, pn := range nodes {
		delete(rs.wanting, pn.InstanceID) // a later change gathers afresh
		sf, ok := p.Unmet[pn.InstanceID]
		if !ok {
			e.unmet.set(pn.InstanceID, nil)
			continue
		}
		e.unmet.set(pn.InstanceID, unmetError(pn, sf, snap.subnets[budgetSubnet(pn, snap)]))
	}
	return e.carryOut(rs, snap, p, budgets)
}

// room is how many more actions the buckets would admit now (admit): those
// of the Assign bucket, and the new ENIs the Create and Attach buckets
// both pay for; and, for a kind with none, how long until one token more
// comes (the sooner of the two).
func (e *Engine) room(rs *runState) (assigns, creates int, next time.Duration) {
	lim := e.limiter()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	left := func(action string) int {
		c := ratelimit.ClassOf(action, true)
		n := int(math.Floor(lim.Tokens(c)+lim.Bucket(c).Refill*e.cfg.Lookahead.Seconds())) - rs.notAsked(c)
		if r := lim.Bucket(c).Refill; n < 1 && r > 0 {
			next = minPositive(next, time.Duration(float64(time.Second)/r))
		}
		return max(n, 0)
	}
	assigns = left(planner.CallAssign)
	creates = min(left(planner.CallCreate), left(planner.CallAttach))
	return assigns, creates, next
}

// carryOut queues the plan's actions the buckets admit, takes their cost
// off budgets, and returns them with when to try the rest again (0: none
// left out).
func (e *Engine) carryOut(rs *runState, snap *snapshot, p planner.Plan, budgets planner.Budgets) ([]planner.Action, time.Duration) {
	actions, retry := e.admit(rs, p.Actions)
	if len(actions) == 0 {
		return nil, retry
	}
	p.Actions = actions
	e.count(func(s *Stats) {
		s.Plans++
		for _, a := range p.Actions {
			s.Planned[a.Kind.String()]++
		}
	})
	// The plan's summary for the log; a handler that wants each action
	// finds the whole plan behind the value.
	e.log.Debug("planned", "plan", p)
	e.queueActions(rs, snap, p.Actions)
	for _, a := range actions {
		id := actionSubnet(a, snap)
		budgets[id] = max(budgets[id]-a.Cost(), 0)
	}
	return actions, retry
}

// actionSubnet is the subnet whose budget an action spends: its own, or
// for an Assign that names none, its ENI's.
func actionSubnet(a planner.Action, snap *snapshot) string {
	if a.SubnetID == "" {
		return snap.enis.at(a.ENIID).SubnetID
	}
	return a.SubnetID
}

// plannable returns the nodes that want addresses, are idle, and whose
// demand has settled (their planner views made as the round's parts take
// them: wants); held, the idle nodes whose demand is still gathering; and
// wake, when the next one of those settles (0: none). askChoice says to
// find whether any node can be served in more than one shape.
func (e *Engine) plannable(rs *runState, snap *snapshot, free func(string) bool, now time.Time, askChoice bool) (w *wants, held gatheringSet, wake time.Duration) {
	wanting, waiting := e.wanting(rs, snap, free)
	spare := e.tokensSpare(rs, waiting)
	w = &wants{e: e, rs: rs, snap: snap, list: rs.wantsBuf[:0]}
	defer func() { rs.wantsBuf = w.list }()
	for _, x := range wanting {
		i, d := x.i, x.d
		n := snap.nodes[i]
		id := n.InstanceID
		if wait := e.gathering(rs, id, d, now, spare); wait > 0 {
			wake = minPositive(wake, wait)
			held.list = append(held.list, gatheringDemand{n: n, d: d, settles: wait})
			continue
		}
		if err := snap.subnetQuarantined(n.SubnetID); err != nil {
			e.unmet.set(id, err)
			continue
		}
		pn, why, kept := e.plannerNodeKept(rs, snap, n, d)
		if why != "" {
			e.unmet.set(id, &reasoned{store.UnmetNotReady, errors.New(why)})
			continue
		}
		if pn.Pending+pn.WarmShortfall <= pn.InFlight {
			e.unmet.set(id, nil)
			continue
		}
		w.add(i, pn, kept, askChoice)
	}
	return w, held, wake
}

// wantingNode is a node that wants addresses: its place in snap.nodes and
// its demand.
type wantingNode struct {
	i int
	d store.Demand
}

// wanting walks the nodes once: those that want addresses and are idle,
// with the demand the walk read for each, and how many of them have pods
// waiting. A node that wants none has nothing unmet and gathers afresh
// when it next does. The list is the run state's, reused by the next
// round: at 5,000 nodes a round would otherwise look each demand up again,
// a map lookup that misses the processor's caches, or allocate the list
// anew.
func (e *Engine) wanting(rs *runState, snap *snapshot, free func(string) bool) (out []wantingNode, waiting int) {
	var met []string
	out = rs.wantingBuf[:0]
	for i := range snap.nodes {
		id := snap.nodes[i].InstanceID
		d := snap.demands.at(id)
		if d.Pending+d.WarmShortfall <= 0 {
			delete(rs.wanting, id)
			met = append(met, id)
			continue
		}
		if !free(id) {
			continue
		}
		if d.Pending > 0 {
			waiting++
		}
		out = append(out, wantingNode{i: i, d: d})
	}
	rs.wantingBuf = out
	e.unmet.clear(met)
	return out, waiting
}

// queueActions schedules each planned action as a task of its node.
func (e *Engine) queueActions(rs *runState, snap *snapshot, actions []planner.Action) {
	for _, a := range actions {
		n := snap.node[a.InstanceID]
		tp := snap.demands.at(a.InstanceID).Trace
		switch a.Kind {
		case planner.CreateAttach:
			begun := rs.queue(a.SubnetID, a.Cost(), firstClass(a))
			later := rs.chain()
			rs.scheduleFor(a.InstanceID, kindCreateAttach, a.Urgent, tp, func(ctx context.Context) error {
				defer begun()
				defer later.attach()
				defer later.modify()
				return e.createAttach(ctx, rs, a, n, begun, later)
			})
		case planner.Assign:
			eni := snap.enis.at(a.ENIID)
			a.SubnetID = actionSubnet(a, snap)
			begun := rs.queue(a.SubnetID, a.Cost(), firstClass(a))
			rs.scheduleFor(a.InstanceID, kindAssign, a.Urgent, tp, func(ctx context.Context) error {
				defer begun()
				return e.assign(ctx, rs, a, eni, begun)
			})
		default:
			e.log.Error("planner returned an unknown action", "kind", a.Kind.String(), "instance", a.InstanceID)
		}
	}
}

// gathering returns how much longer a node's demand should be left to
// settle before it is planned (0: plan it now). Pods of one burst arrive
// over a moment and the agent states its demand as they do; planning the
// first statement would spend a call on part of the burst and another on
// the rest. A demand is planned once it has been still for Gather
// (WarmGather when no pod waits), or once the node has wanted addresses for
// GatherMax (or WarmGather, if longer).
//
// A second call costs only time the buckets would lose, so when they have
// tokens to spare for it (spare, tokensSpare) a demand with pods waiting
// is planned at once: gathering would keep the pods waiting and buy
// nothing.
func (e *Engine) gathering(rs *runState, node string, d store.Demand, now time.Time, spare bool) time.Duration {
	first, ok := rs.wanting[node]
	if !ok {
		first = now
		rs.wanting[node] = now
	}
	if spare && d.Pending > 0 {
		return 0
	}
	gather, most := e.cfg.Gather, e.cfg.GatherMax
	if d.Pending == 0 {
		gather, most = e.cfg.WarmGather, max(e.cfg.GatherMax, e.cfg.WarmGather)
	}
	settled := d.UpdatedAt.Add(gather).Sub(now)
	capped := first.Add(most).Sub(now)
	return max(min(settled, capped), 0)
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || b < a {
		return b
	}
	return a
}

// plannerNode builds the planner's view of one node, or says what is
// missing for it. The view without its demand is kept between rounds
// (nodeMemo) and built again only when the node's records changed.
func (e *Engine) plannerNode(rs *runState, snap *snapshot, n store.Node, d store.Demand) (planner.Node, string) {
	pn, why, _ := e.plannerNodeKept(rs, snap, n, d)
	return pn, why
}

// plannerNodeKept is plannerNode, and whether the view (without its
// demand) is the one the memo keeps for the node.
func (e *Engine) plannerNodeKept(rs *runState, snap *snapshot, n store.Node, d store.Demand) (planner.Node, string, bool) {
	lim, ok := e.inst.Limits(n)
	if !ok {
		return planner.Node{}, fmt.Sprintf("instance type %q limits unknown", n.InstanceType), false
	}
	if n.SubnetID == "" {
		return planner.Node{}, "node has no subnet", false
	}
	if _, ok := snap.subnets[n.SubnetID]; !ok {
		return planner.Node{}, fmt.Sprintf("subnet %s not yet known", n.SubnetID), false
	}
	enis := snap.byNode.at(n.InstanceID)
	keep := memoable(snap, n, lim)
	pn, slots, ok := planner.Node{}, -1, false
	if keep {
		pn, slots, ok = rs.nodes.get(n, enis, lim)
	}
	if !ok {
		var why string
		if pn, why = e.nodeView(snap, n, enis, lim); why != "" {
			return planner.Node{}, why, false
		}
		if keep {
			slots = rs.nodes.put(n, enis, lim, pn)
		}
	}
	pn.Pending, pn.WarmShortfall = d.Pending, d.WarmShortfall
	if slots < 0 {
		slots = slotsOf(enis)
	}
	pn.InFlight = e.inFlightOf(rs, n.InstanceID, d, slots)
	return pn, "", keep
}

// nodeView is the planner's view of node n, of ENIs enis and limits lim,
// without its demand, or what is missing for it.
func (e *Engine) nodeView(snap *snapshot, n store.Node, enis []store.ENI, lim planner.Limits) (planner.Node, string) {
	if _, ok := snap.primary(n.InstanceID); !ok {
		return planner.Node{}, "primary ENI not yet known"
	}
	pn := planner.Node{
		InstanceID:     n.InstanceID,
		SubnetID:       n.SubnetID,
		SecurityGroups: n.SecurityGroups,
		Mode:           mode(n.Mode),
		Limits:         lim,
		MaxENIs:        n.MaxENIs,
		FillNewENIs:    n.WarmIPTarget == 0 && n.MinimumIPTarget == 0,
	}
	for _, x := range enis {
		if !x.Primary && x.Status != store.ENIAttached {
			continue
		}
		pn.ENIs = append(pn.ENIs, planner.ENI{
			ID:          x.ID,
			DeviceIndex: x.DeviceIndex,
			SubnetID:    x.SubnetID,
			Primary:     x.Primary,
			Secondary:   len(x.Addresses),
			Prefixes:    len(x.Prefixes),
		})
	}
	if why := place(snap, n, &pn, e.cfg.Clock.Now()); why != "" {
		return planner.Node{}, why
	}
	return pn, ""
}

// inFlightOf is what the broker's records give the node beyond what its
// demand was computed against, its ENIs holding slots (slotsOf). An agent that states what it knew (Known)
// gets an exact answer: whatever the records hold beyond it is on its way
// to the pool, and nothing else is. For a demand without it, deliveries
// recorded after the demand was stored are counted instead, a clock-based
// estimate.
func (e *Engine) inFlightOf(rs *runState, node string, d store.Demand, slots int) int {
	if !d.HasKnown {
		return e.deliveredSince(rs, node, d.UpdatedAt)
	}
	return max(slots-d.Known, 0)
}

// slotsOf counts address slots as agents count them in Known: secondary
// addresses plus a prefix's addresses, over every ENI listed for the node.
func slotsOf(enis []store.ENI) int {
	n := 0
	for _, x := range enis {
		n += allotv1.PodAddresses(len(x.Addresses), len(x.Prefixes))
	}
	return n
}

func mode(m string) planner.Mode {
	if (store.Node{Mode: m}).PrefixMode() {
		return planner.Prefix
	}
	return planner.SecondaryIP
}

// unmetError turns the planner's shortfall into the error agents and
// operators see.
func unmetError(n planner.Node, sf planner.Shortfall, sn store.Subnet) error {
	switch sf.Reason {
	case planner.BudgetExhausted:
		return &rpcerr.BudgetError{SubnetID: sn.ID, Limit: sn.Limit(), Use: sn.Attached + sn.Reserved, Requested: int64(sf.Addresses)}
	case planner.NodeFull:
		return &reasoned{store.UnmetNodeFull, fmt.Errorf("node %s is full: %d addresses short (max %d ENIs of %d addresses)",
			n.InstanceID, sf.Addresses, n.Limits.MaxENIs, n.Limits.IPv4PerENI)}
	case planner.NodeBusy:
		return fmt.Errorf("node %s: %d addresses wait for an ENI being attached", n.InstanceID, sf.Addresses)
	}
	return fmt.Errorf("node %s: %d addresses short", n.InstanceID, sf.Addresses)
}
