package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/allotnet/allot/broker/instances"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// Task kinds, as counted in Stats.
const (
	kindCreateAttach = "create-attach"
	kindAssign       = "assign"
	kindResumeAttach = "resume-attach"
	kindUnassign     = "unassign"
	kindDelete       = "delete"
	kindResolve      = "resolve"
)

// round reads etcd, fills in what it lacks from EC2, queues upkeep and
// planned actions for idle nodes, and proposes releases.
func (e *Engine) round(ctx context.Context, rs *runState) error {
	e.count(func(s *Stats) { s.Rounds++ })
	// A node busy when the read starts may change under the read; only
	// nodes idle both before and after it are planned from it.
	busyBefore := e.busyNodes(rs)
	// Read before the snapshot: an action begun after this read is counted
	// here or in the snapshot's reservations, maybe both, never neither.
	queued := e.queuedCost(rs)
	now := e.cfg.Now()
	full := now.Sub(rs.intentsRead) >= e.cfg.Interval
	snap, err := e.load(ctx, full)
	if err != nil {
		return err
	}
	if full {
		rs.intentsRead = now
	}
	changed, infoErr := e.inst.Ensure(ctx, instances.View{
		Nodes: snap.nodes, Subnets: snap.subnets,
		HasPrimary: func(id string) bool { _, ok := snap.primary(id); return ok },
	}, now)
	if infoErr != nil {
		e.stopIfDeposed(rs, infoErr)
		e.log.Warn("describing node info", "err", infoErr)
	}
	if changed {
		if snap, err = e.load(ctx, false); err != nil {
			return err
		}
	}
	now = e.cfg.Now()
	free := func(node string) bool { return !busyBefore[node] && e.idle(rs, node, now) }
	held := e.upkeep(ctx, rs, snap, free, now)
	e.plan(rs, snap, queued, func(n string) bool { return free(n) && !held[n] }, now)
	e.proposeReleases(ctx, rs, snap, func(n string) bool { return free(n) && !held[n] }, now)
	e.publishUnmet(ctx, rs, snap)
	return nil
}

func (e *Engine) busyNodes(rs *runState) map[string]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]bool, len(rs.busy))
	for n := range rs.busy {
		out[n] = true
	}
	return out
}

// upkeep queues the work that must finish before a node is planned again:
// intents left open, ENIs created but not attached, ENIs detached but not
// deleted, and acknowledged releases. It returns the nodes it held back.
func (e *Engine) upkeep(ctx context.Context, rs *runState, snap *snapshot, free func(string) bool, now time.Time) map[string]bool {
	held := map[string]bool{}
	for node, open := range snap.open {
		held[node] = true
		var stale []store.Intent
		for _, in := range open {
			if e.resolvable(rs, in, now) {
				stale = append(stale, in)
			}
		}
		if len(stale) == 0 || !free(node) {
			continue
		}
		e.schedule(rs, node, kindResolve, false, func(ctx context.Context) error {
			return e.resolveIntents(ctx, rs, stale)
		})
	}
	for _, n := range snap.nodes {
		id := n.InstanceID
		if held[id] {
			continue
		}
		for _, x := range snap.byNode[id] {
			switch {
			case x.Primary || snap.openENI[x.ID]:
			case x.Status == store.ENICreated:
				held[id] = true
				if free(id) {
					eni := x
					e.schedule(rs, id, kindResumeAttach, false, func(ctx context.Context) error {
						return e.resumeAttach(ctx, rs, eni)
					})
				}
			case x.Status == store.ENIDetached:
				held[id] = true
				if free(id) {
					eni := x
					e.schedule(rs, id, kindDelete, false, func(ctx context.Context) error {
						return e.deleteDetached(ctx, rs, eni)
					})
				}
			}
		}
		if held[id] {
			continue
		}
		for _, r := range snap.releases[id] {
			switch {
			case r.State == store.ReleaseAcked:
				held[id] = true
				if free(id) {
					rel, usage, eni := r, snap.usage[id], snap.enis[r.ENIID]
					e.schedule(rs, id, kindUnassign, false, func(ctx context.Context) error {
						return e.carryOutRelease(ctx, rs, rel, eni, usage)
					})
				}
			case r.State == store.ReleaseProposed && now.Sub(r.CreatedAt) > e.cfg.ReleaseTimeout:
				if err := e.st.CancelRelease(ctx, r.ID); err != nil {
					e.stopIfDeposed(rs, err)
					e.log.Warn("cancelling unacknowledged release", "instance", id, "release", r.ID, "err", err)
					continue
				}
				e.count(func(s *Stats) { s.Cancelled++ })
				e.log.Info("release not acknowledged in time; cancelled", "instance", id, "release", r.ID)
			}
		}
	}
	return held
}

// plan runs the planner over the idle nodes with demand and queues its
// actions.
func (e *Engine) plan(rs *runState, snap *snapshot, queued map[string]int64, free func(string) bool, now time.Time) {
	var nodes []planner.Node
	var gatherWake time.Duration
	defer func() {
		if gatherWake > 0 {
			rs.wakeIn(gatherWake)
		}
	}()
	for _, n := range snap.nodes {
		id := n.InstanceID
		d := snap.demands[id]
		if d.Pending+d.WarmShortfall <= 0 {
			delete(rs.wanting, id)
			e.setUnmet(rs, id, nil)
			continue
		}
		if !free(id) {
			continue
		}
		if wait := e.gathering(rs, id, d, now); wait > 0 {
			gatherWake = minPositive(gatherWake, wait)
			continue
		}
		pn, why := e.plannerNode(rs, snap, n, d)
		if why != "" {
			e.setUnmet(rs, id, &reasoned{store.UnmetNotReady, errors.New(why)})
			continue
		}
		if pn.Pending+pn.WarmShortfall <= pn.InFlight {
			e.setUnmet(rs, id, nil)
			continue
		}
		delete(rs.wanting, id) // a later change gathers afresh
		nodes = append(nodes, pn)
	}
	if len(nodes) == 0 {
		return
	}
	budgets := planner.Budgets{}
	for id, sn := range snap.subnets {
		budgets[id] = max(sn.Available()-queued[id], 0)
	}
	p := planner.Make(nodes, budgets)
	for _, pn := range nodes {
		sf, ok := p.Unmet[pn.InstanceID]
		if !ok {
			e.setUnmet(rs, pn.InstanceID, nil)
			continue
		}
		e.setUnmet(rs, pn.InstanceID, unmetError(pn, sf, snap.subnets[pn.SubnetID]))
	}
	actions, retry := e.admit(rs, p.Actions)
	if retry > 0 {
		gatherWake = minPositive(gatherWake, retry)
	}
	if len(actions) == 0 {
		return
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
	for _, a := range p.Actions {
		n := snap.node[a.InstanceID]
		switch a.Kind {
		case planner.CreateAttach:
			begun := e.queue(rs, a.SubnetID, a.Cost(), firstClass(a))
			e.schedule(rs, a.InstanceID, kindCreateAttach, a.Urgent, func(ctx context.Context) error {
				defer begun()
				return e.createAttach(ctx, rs, a, n, begun)
			})
		case planner.Assign:
			eni := snap.enis[a.ENIID]
			if a.SubnetID == "" {
				a.SubnetID = eni.SubnetID
			}
			begun := e.queue(rs, a.SubnetID, a.Cost(), firstClass(a))
			e.schedule(rs, a.InstanceID, kindAssign, a.Urgent, func(ctx context.Context) error {
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
func (e *Engine) gathering(rs *runState, node string, d store.Demand, now time.Time) time.Duration {
	first, ok := rs.wanting[node]
	if !ok {
		first = now
		rs.wanting[node] = now
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
// missing for it.
func (e *Engine) plannerNode(rs *runState, snap *snapshot, n store.Node, d store.Demand) (planner.Node, string) {
	lim, ok := e.inst.Limits(n)
	if !ok {
		return planner.Node{}, fmt.Sprintf("instance type %q limits unknown", n.InstanceType)
	}
	if n.SubnetID == "" {
		return planner.Node{}, "node has no subnet"
	}
	if _, ok := snap.subnets[n.SubnetID]; !ok {
		return planner.Node{}, fmt.Sprintf("subnet %s not yet known", n.SubnetID)
	}
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
		Pending:        d.Pending,
		WarmShortfall:  d.WarmShortfall,
		InFlight:       e.inFlight(rs, snap, n.InstanceID, d),
		FillNewENIs:    n.WarmIPTarget == 0 && n.MinimumIPTarget == 0,
	}
	for _, x := range snap.byNode[n.InstanceID] {
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
	return pn, ""
}

// inFlight is what the broker's records give the node beyond what its
// demand was computed against. An agent that states what it knew (Known)
// gets an exact answer: whatever the records hold beyond it is on its way
// to the pool, and nothing else is. For a demand without it, deliveries
// recorded after the demand was stored are counted instead, a clock-based
// estimate.
func (e *Engine) inFlight(rs *runState, snap *snapshot, node string, d store.Demand) int {
	if !d.HasKnown {
		return e.deliveredSince(rs, node, d.UpdatedAt)
	}
	return max(slotsOf(snap.byNode[node])-d.Known, 0)
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
		return &rpcerr.BudgetError{SubnetID: n.SubnetID, Limit: sn.Limit(), Use: sn.Attached + sn.Reserved, Requested: int64(sf.Addresses)}
	case planner.NodeFull:
		return &reasoned{store.UnmetNodeFull, fmt.Errorf("node %s is full: %d addresses short (max %d ENIs of %d addresses)",
			n.InstanceID, sf.Addresses, n.Limits.MaxENIs, n.Limits.IPv4PerENI)}
	case planner.NodeBusy:
		return fmt.Errorf("node %s: %d addresses wait for an ENI being attached", n.InstanceID, sf.Addresses)
	}
	return fmt.Errorf("node %s: %d addresses short", n.InstanceID, sf.Addresses)
}

// setUnmet records (nil: clears) why a node's demand is unmet, logging each
// new reason once.
func (e *Engine) setUnmet(rs *runState, node string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil {
		delete(e.unmet, node)
		delete(rs.reported, node)
		return
	}
	e.unmet[node] = err
	key := reasonKey(err)
	if rs.reported[node] == key {
		return
	}
	rs.reported[node] = key
	var be *rpcerr.BudgetError
	if errors.As(err, &be) {
		e.log.Warn("demand unmet: subnet budget exhausted", "instance", node, "subnet", be.SubnetID,
			"limit", be.Limit, "use", be.Use, "requested", be.Requested)
		return
	}
	e.log.Info("demand unmet", "instance", node, "reason", err)
}

func reasonKey(err error) string {
	var be *rpcerr.BudgetError
	if errors.As(err, &be) {
		return "budget:" + be.SubnetID
	}
	return err.Error()
}
