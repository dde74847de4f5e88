package executor

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/allotnet/allot/broker/instances"
	"github.com/allotnet/allot/broker/store"
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
	ph := newRoundPhases(e.cfg.RoundCPU)
	defer func() {
		ph.end()
		e.count(func(s *Stats) { s.observeRound(ph) })
	}()
	// A node busy when the read starts may change under the read; only
	// nodes idle both before and after it are planned from it.
	busyBefore := rs.busyNodes()
	// Read before the snapshot: an action begun after this read is counted
	// here or in the snapshot's reservations, maybe both, never neither.
	queued := rs.queuedCost()
	// Proposals still being written may be missing from the snapshot.
	mayPropose := !e.proposing.Load()
	now := e.cfg.Clock.Now()
	// The view follows the intents; the mirror read in full serves only
	// a round that cannot plan from the view.
	if !e.viewLive() && now.Sub(rs.intentsRead) >= e.cfg.Interval {
		e.refreshIntents(ctx, rs, rs.intentsRead.IsZero())
		rs.intentsRead = now
	}
	snap, err := e.current(ctx, ph)
	if errors.Is(err, errBehind) {
		return nil // the next round waits for the view again
	}
	if err != nil {
		return err
	}
	// What the nodes' instance facts lack is described and recorded apart
	// from the round (EC2 calls, etcd reads and writes); a later round,
	// woken by those writes, plans with them.
	e.inst.StartEnsure(ctx, instances.View{
		Nodes: snap.nodes, Subnets: snap.ensureView(),
		HasPrimary: func(id string) bool { _, ok := snap.primary(id); return ok },
	}, now, func(_ bool, err error) {
		if err != nil && ctx.Err() == nil {
			e.stopIfDeposed(rs, err)
			e.log.Warn("describing node info", "err", err)
		}
	})
	ph.mark(phaseDescribe)
	now = e.cfg.Clock.Now()
	free := func(node string) bool { return !busyBefore[node] && rs.idle(node, now) }
	e.quarantine(snap)
	held := e.upkeep(ctx, rs, snap, free, now)
	ph.mark(phaseUpkeep)
	// Planning and proposals ask about every node with demand or excess:
	// whether each is idle is read once, after upkeep queued its tasks.
	// Planning asks about each node once, and a node it queues an action
	// for has demand, which proposals pass by.
	// The three reasons a node is passed by go into one set, so the walk
	// over thousands of wanting nodes asks one map, not three.
	notIdle := rs.notIdle(now)
	for n := range busyBefore {
		notIdle[n] = true
	}
	for n := range held {
		notIdle[n] = true
	}
	planFree := func(n string) bool { return !notIdle[n] }
	e.plan(rs, snap, queued, planFree, now)
	ph.mark(phasePlan)
	e.forgetDeparted(rs, snap)
	e.proposeReleases(ctx, rs, snap, planFree, now, mayPropose)
	e.publishStatus(ctx, rs, snap.statusIDs())
	ph.mark(phaseRelease)
	return nil
}

// refreshIntents reads every open intent from etcd into the store's
// mirror, which holds the engine's own as it writes them: the read brings
// in other writers' (the reconciler's, a previous leader's). Only a round
// that reads the state in full (the view is not following etcd) plans from
// the mirror. The read takes every intent etcd still keeps, finished ones
// included, thousands during a burst, so after the first round it runs in
// the background, one read at a time, and the round plans from the mirror
// as it stands: the read's finds reach the next round, never a round's own
// latency.
func (e *Engine) refreshIntents(ctx context.Context, rs *runState, wait bool) {
	if !e.refreshing.CompareAndSwap(false, true) {
		return
	}
	read := func() {
		defer e.refreshing.Store(false)
		if _, err := e.st.ListOpenIntents(ctx); err != nil && ctx.Err() == nil {
			e.stopIfDeposed(rs, err)
			e.log.Warn("reading open intents", "err", err)
		}
	}
	if wait {
		read()
		return
	}
	e.publishers.Go(read)
}

// publishStatus writes the round's node status changes in the background,
// one batch at a time: each is an etcd write, and a round that finds a few
// hundred would otherwise hold up planning for seconds. A round that finds
// the last batch still being written leaves its changes to a later round.
func (e *Engine) publishStatus(ctx context.Context, rs *runState, ids []string) {
	if !e.publishing.CompareAndSwap(false, true) {
		return
	}
	now := e.cfg.Clock.Now()
	e.publishers.Go(func() {
		defer e.publishing.Store(false)
		e.unmet.publish(ctx, e.cfg.Store, ids, now, func(err error) { e.stopIfDeposed(rs, err) })
	})
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
		rs.schedule(node, kindResolve, false, func(ctx context.Context) error {
			return e.resolveIntents(ctx, rs, stale)
		})
	}
	for _, id := range upkeepNodes(snap) {
		if held[id] {
			continue
		}
		enis := snap.byNode.at(id)
		for k := range enis {
			x := &enis[k]
			switch {
			case x.Status != store.ENICreated && x.Status != store.ENIDetached:
			case x.Primary || snap.openENI[x.ID]:
			case x.Status == store.ENICreated:
				held[id] = true
				if free(id) {
					eni := *x
					rs.schedule(id, kindResumeAttach, false, func(ctx context.Context) error {
						return e.resumeAttach(ctx, rs, eni)
					})
				}
			case x.Status == store.ENIDetached:
				held[id] = true
				if free(id) {
					eni, rel := *x, ackedRelease(snap.releases[id], x.ID)
					rs.schedule(id, kindDelete, false, func(ctx context.Context) error {
						return e.deleteDetached(ctx, rs, eni, rel)
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
					rel, usage, eni := r, snap.usage.at(id), snap.enis.at(r.ENIID)
					rs.schedule(id, kindUnassign, false, func(ctx context.Context) error {
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

// upkeepNodes returns the sound nodes with an ENI upkeep has work for or
// a release, in snap.nodes' order (by instance ID). The rest have nothing
// for upkeep, and at 5,000 nodes walking every one's ENIs in every round,
// 25,000 records that mostly miss the processor's caches, was a sixth of
// a round's CPU.
func upkeepNodes(snap *snapshot) []string {
	ids := make([]string, 0, len(snap.unsettled)+len(snap.releases))
	for id := range snap.unsettled {
		ids = append(ids, id)
	}
	for id := range snap.releases {
		if snap.unsettled[id] == 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.DeleteFunc(ids, func(id string) bool {
		_, sound := snap.node[id]
		return !sound
	})
}
