package brokerlink

import (
	"context"
	"net/netip"
	"slices"

	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/pool"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// releasing returns, per release ID, what the pool has set aside for it:
// exactly what was (or is about to be) acknowledged, since the pool
// persists its agreement before the ack is sent.
func (l *Link) releasing() map[string]pool.Ack {
	out := map[string]pool.Ack{}
	for _, a := range l.pool.Snapshot().Addresses {
		if a.State != checkpoint.Releasing {
			continue
		}
		ack := out[a.ReleaseID]
		if a.Prefix.IsValid() {
			if !slices.Contains(ack.Prefixes, a.Prefix) {
				ack.Prefixes = append(ack.Prefixes, a.Prefix)
			}
		} else {
			ack.Addresses = append(ack.Addresses, a.Addr)
		}
		out[a.ReleaseID] = ack
	}
	return out
}

// handleReleasesLocked answers the broker's release proposals; applyMu is
// held and the ENIs of the same snapshot are applied.
//
// A new proposal gets what the pool agrees to (free, not cooling, not
// held); the pool marks it releasing before the ack goes out. A release the
// pool set aside earlier (before a restart, or when an ack failed) is
// acknowledged again with exactly that set — the broker accepts a repeated
// answer — and that call also tells what became of it: a release the broker
// no longer knows was withdrawn, and its addresses come back to the pool
// once a fresh read shows them still on the node. Addresses of a release
// carried out leave the pool when the broker stops listing them
// (applyLocked), never before.
//
// A broker that sets states (NodeEvent.release_states) also lists the
// releases it holds an answer to, as acknowledged: those are not asked
// about again, and a release the pool set aside that is listed in neither
// state was carried out or withdrawn, which a fresh read settles
// (withdrawnLocked) without another acknowledgement. Without states the
// repeated acknowledgement is how the link finds out.
func (l *Link) handleReleasesLocked(ctx context.Context, proposals []*allotv1.ReleaseProposal, states bool) {
	mine := l.releasing()
	proposed := map[string]bool{}
	var verify []string
	for _, p := range proposals {
		proposed[p.GetReleaseId()] = true
		if l.answerLocked(ctx, p, mine) {
			verify = append(verify, p.GetReleaseId())
		}
	}
	for id, ack := range mine {
		switch {
		case proposed[id]:
		case states:
			verify = append(verify, id)
		case !l.acked[id] && l.reackLocked(ctx, id, ack):
			verify = append(verify, id)
		}
	}
	if len(verify) > 0 {
		l.withdrawnLocked(ctx, verify)
	}
	for id := range l.acked {
		if _, ok := mine[id]; !ok && !proposed[id] {
			delete(l.acked, id)
		}
	}
}

// answerLocked answers one listed release: the pool's agreement for a new
// proposal, the same set again for one it set aside earlier. It reports
// whether the broker no longer knows a release the pool set something
// aside for, which a fresh read then settles.
func (l *Link) answerLocked(ctx context.Context, p *allotv1.ReleaseProposal, mine map[string]pool.Ack) (verify bool) {
	id := p.GetReleaseId()
	if p.GetState() == allotv1.ReleaseState_RELEASE_STATE_ACKED {
		// The broker holds our answer; what the pool set aside for it
		// (if anything) leaves when the broker stops listing it.
		l.acked[id] = true
		return false
	}
	if id == "" || l.acked[id] {
		return false
	}
	ack, had := mine[id]
	if !had {
		addrs, prefixes := parseLists(p.GetAddresses(), p.GetPrefixes())
		var err error
		if ack, err = l.pool.ProposeRelease(id, addrs, prefixes); err != nil {
			l.log.Error("cannot set release aside; not acknowledged", "release", id, "err", err)
			return false
		}
	}
	switch err := l.ackRelease(ctx, id, ack); {
	case err == nil:
		l.acked[id] = true
	case isNotFound(err):
		return !ack.Empty()
	case isWrongState(err):
		l.acked[id] = true
		if had {
			l.log.Error("broker holds a different answer to a release the pool set aside; addresses stay set aside",
				"release", id, "err", err)
			return false
		}
		// Whatever the broker recorded was answered before the pool set
		// anything aside for this release, so it was empty: what was just
		// set aside will not be taken.
		if _, err := l.pool.CancelRelease(id); err != nil {
			l.log.Error("cannot return addresses of a release answered earlier", "release", id, "err", err)
		}
	default:
		l.log.Warn("release acknowledgement failed; will retry", "release", id, "err", err)
	}
	return false
}

// reackLocked acknowledges again a release the pool set aside that the
// broker (listing proposals only) no longer lists: the answer tells what
// became of it. It reports whether the broker no longer knows it.
func (l *Link) reackLocked(ctx context.Context, id string, ack pool.Ack) (verify bool) {
	switch err := l.ackRelease(ctx, id, ack); {
	case err == nil:
		l.acked[id] = true
	case isNotFound(err):
		return true
	case isWrongState(err):
		l.acked[id] = true
		l.log.Error("broker holds a different answer to a release the pool set aside; addresses stay set aside",
			"release", id, "err", err)
	default:
		l.log.Warn("release acknowledgement failed; will retry", "release", id, "err", err)
	}
	return false
}

// withdrawnLocked handles releases the broker no longer knows. A fresh read
// of the node's record (registration answers with it) drops whatever was
// taken; what is still listed was never taken and returns to the pool.
func (l *Link) withdrawnLocked(ctx context.Context, ids []string) {
	resp, err := l.register(ctx)
	if err != nil {
		l.log.Warn("cannot re-read the node's record to settle withdrawn releases; will retry", "releases", ids, "err", err)
		return
	}
	l.applyLocked(resp.GetEnis(), resp.GetRevision())
	mine := l.releasing()
	for _, id := range ids {
		if _, ok := mine[id]; !ok {
			continue
		}
		n, err := l.pool.CancelRelease(id)
		if err != nil {
			l.log.Error("cannot return addresses of a withdrawn release", "release", id, "err", err)
			continue
		}
		l.log.Info("release withdrawn by the broker; addresses back in the pool", "release", id, "addresses", n)
	}
}

// ackRelease sends the pool's answer.
func (l *Link) ackRelease(ctx context.Context, id string, ack pool.Ack) error {
	req := &allotv1.AckReleaseRequest{InstanceId: l.node.GetInstanceId(), ReleaseId: id}
	for _, a := range ack.Addresses {
		req.Addresses = append(req.Addresses, a.String())
	}
	for _, p := range ack.Prefixes {
		req.Prefixes = append(req.Prefixes, p.String())
	}
	cctx, cancel := l.call(ctx)
	defer cancel()
	_, err := l.client.AckRelease(cctx, req)
	if err == nil {
		l.log.Info("release acknowledged", "release", id, "addresses", len(ack.Addresses), "prefixes", len(ack.Prefixes))
	}
	return err
}

func parseLists(addrs, prefixes []string) ([]netip.Addr, []netip.Prefix) {
	var as []netip.Addr
	for _, s := range addrs {
		if a, err := netip.ParseAddr(s); err == nil {
			as = append(as, a)
		}
	}
	var ps []netip.Prefix
	for _, s := range prefixes {
		if p, err := netip.ParsePrefix(s); err == nil {
			ps = append(ps, p.Masked())
		}
	}
	return as, ps
}
