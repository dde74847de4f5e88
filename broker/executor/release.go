package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// proposeReleases proposes giving back addresses a node's agent has stated
// as excess to its warm targets (beyond the margin) for ReleaseAfter. A
// proposal only asks: nothing is unassigned until the agent acknowledges
// it. A node's releases go one at a time (one ENI each); a surplus that
// outlasts a release that took something keeps its age, so the next is
// proposed as soon as the last is done, not ReleaseAfter later: a node that
// scaled down gives back all its excess ENIs after one wait (afterRelease).
// A report older than the last release is safe to read: what that release
// took is no longer on an attached ENI, so surplus counts it out of the
// stated excess.
//
// The proposals are written in the background (writeProposals): after a
// burst thousands of nodes come due at once, and a round that waited for
// each write held up planning for seconds. mayPropose is false when the
// last round's proposals were still being written as this round's snapshot
// was taken: the snapshot may not show them, so this round proposes none,
// and leaves the writer's notes (rs.proposed) alone.
func (e *Engine) proposeReleases(ctx context.Context, rs *runState, snap *snapshot, free func(string) bool, now time.Time, mayPropose bool) {
	var due []store.Release
	for i := range snap.nodes {
		n := &snap.nodes[i]
		id := n.InstanceID
		if !free(id) {
			continue
		}
		d := snap.demands.at(id)
		if d.Pending > 0 || d.WarmShortfall > 0 {
			// A node that wants addresses has none to spare (surplus),
			// and its surplus, if any comes, starts its wait afresh.
			e.surplusSeen(rs, id, time.Time{})
			continue
		}
		if len(snap.open[id]) > 0 {
			continue
		}
		u, ok := snap.usage.get(id)
		if !ok {
			e.surplusSeen(rs, id, time.Time{})
			continue
		}
		rels := snap.releases[id]
		if openRelease(rels) {
			continue
		}
		if mayPropose {
			e.afterRelease(rs, id, rels)
		}
		p := rs.surplusOf.surplus(*n, snap.byNode.at(id), d, u, e.cfg.ReleaseMargin)
		if p.Empty() {
			e.surplusSeen(rs, id, time.Time{})
			continue
		}
		since := e.surplusSeen(rs, id, now)
		if now.Sub(since) < e.cfg.ReleaseAfter || !mayPropose {
			continue
		}
		due = append(due, store.Release{
			InstanceID: id, ENIID: p.ENIID, State: store.ReleaseProposed,
			Addresses: p.Addresses, Prefixes: p.Prefixes, CreatedAt: now,
		})
	}
	if len(due) > 0 && e.proposing.CompareAndSwap(false, true) {
		e.publishers.Go(func() {
			defer e.proposing.Store(false)
			e.writeProposals(ctx, rs, due)
		})
	}
}

// writeProposals records the proposals, several to a transaction, and
// notes each one recorded as its node's last (afterRelease).
func (e *Engine) writeProposals(ctx context.Context, rs *runState, due []store.Release) {
	out, errs, err := e.st.ProposeReleases(ctx, due)
	for i, r := range out {
		if errs[i] != nil || r.Rev == 0 {
			if errs[i] != nil {
				e.log.Warn("proposing release", "instance", due[i].InstanceID, "eni", due[i].ENIID, "err", errs[i])
			}
			continue
		}
		rs.proposed[r.InstanceID] = r.ID
		e.count(func(s *Stats) { s.Proposed++ })
		e.log.Info("release proposed", "instance", r.InstanceID, "release", r.ID, "eni", r.ENIID,
			"addresses", len(r.Addresses), "prefixes", len(r.Prefixes))
	}
	if err != nil && ctx.Err() == nil {
		e.stopIfDeposed(rs, err)
		e.log.Warn("proposing releases", "count", len(due), "err", err)
	}
}

// afterRelease settles a node's last proposal once it is no longer open:
// a release carried out with something acknowledged lets the surplus keep
// its age; one cancelled (unacknowledged, its record gone) or acknowledged
// empty (every address in use or cooling) restarts the wait, so a node
// whose free addresses cannot be given back yet is not asked again every
// round.
func (e *Engine) afterRelease(rs *runState, node string, rels []store.Release) {
	last, ok := rs.proposed[node]
	if !ok {
		return
	}
	delete(rs.proposed, node)
	for _, r := range rels {
		if r.ID == last && r.State == store.ReleaseDone && len(r.AckedAddrs)+len(r.AckedPfx) > 0 {
			return
		}
	}
	delete(rs.surplus, node)
}

// surplusSeen records when a node's surplus was first seen (zero clears it)
// and returns that time.
func (e *Engine) surplusSeen(rs *runState, node string, now time.Time) time.Time {
	if now.IsZero() {
		delete(rs.surplus, node)
		return now
	}
	since, ok := rs.surplus[node]
	if !ok {
		rs.surplus[node] = now
		return now
	}
	return since
}

func openRelease(rels []store.Release) bool {
	for _, r := range rels {
		if r.State == store.ReleaseProposed || r.State == store.ReleaseAcked {
			return true
		}
	}
	return false
}

// carryOutRelease takes back what the agent acknowledged, and nothing else:
// only acked addresses still on the ENI, minus any the agent's latest usage
// report says a pod holds (a contradiction is resolved towards keeping).
// An ENI the release covers whole is given up by detach and delete alone
// (giveUp); otherwise what is taken is unassigned and the ENI stays.
func (e *Engine) carryOutRelease(ctx context.Context, rs *runState, r store.Release, eni store.ENI, u store.Usage) error {
	if eni.ID == "" {
		if err := e.st.CancelRelease(ctx, r.ID); err != nil {
			return fmt.Errorf("cancel release %s of a vanished ENI: %w", r.ID, err)
		}
		return nil
	}
	c := planner.CarryOut(r.AckedAddrs, r.AckedPfx, heldENI(eni), u.Assigned)
	for _, h := range c.Held {
		e.log.Warn("acknowledged address or prefix is reported in use by a pod; kept", "instance", r.InstanceID, "held", h, "release", r.ID)
	}
	if c.Whole {
		if done, err := e.giveUp(ctx, rs, r, eni); done || err != nil {
			return err
		}
	}
	addrs, prefixes := c.Addresses, c.Prefixes
	if len(addrs)+len(prefixes) > 0 {
		in, err := e.begin(ctx, rs, store.Intent{
			Kind: store.IntentUnassign, InstanceID: r.InstanceID, ENIID: eni.ID, SubnetID: eni.SubnetID,
			Addresses: addrs, Prefixes: prefixes, ReleaseID: r.ID,
		})
		if err != nil {
			return err
		}
		defer rs.own(in.ID, false)
		err = e.ec2.UnassignAddresses(ctx, eni.ID, addrs, prefixes)
		if err != nil {
			e.fail(ctx, in, err)
			return fmt.Errorf("unassign %d addresses and %d prefixes from %s: %w", len(addrs), len(prefixes), eni.ID, err)
		}
		if err := e.st.CompleteUnassign(ctx, in.ID, eni.ID, addrs, prefixes); err != nil {
			return fmt.Errorf("record unassign from %s: %w", eni.ID, err)
		}
		e.count(func(s *Stats) { s.Released += int64(allotv1.PodAddresses(len(addrs), len(prefixes))) })
	}
	if err := e.st.FinishRelease(ctx, r.ID); err != nil {
		return fmt.Errorf("finish release %s: %w", r.ID, err)
	}
	e.log.Info("release carried out", "instance", r.InstanceID, "release", r.ID, "eni", eni.ID,
		"addresses", len(addrs), "prefixes", len(prefixes))
	return nil
}
