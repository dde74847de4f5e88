package executor

import (
	"context"
	"errors"
	"time"

	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// statusRefresh is how stale a published message may grow while its reason
// stays the same (a budget refusal's figures move as other nodes allocate):
// the record is rewritten on a change of reason at once, on a change of
// figures at most this often.
const statusRefresh = 30 * time.Second

// reasoned tags an unmet error with the store.NodeStatus reason it is
// published under; an unmet error without one is transient (an ENI being
// attached) and leaves what was published alone.
type reasoned struct {
	reason string
	err    error
}

func (r *reasoned) Error() string { return r.err.Error() }
func (r *reasoned) Unwrap() error { return r.err }

// published is what the engine last wrote for one node.
type published struct {
	reason, message string
	at              time.Time
}

// unmetStatus returns the reason and message err is published under; ok is
// false for a transient reason.
func unmetStatus(err error) (reason, message string, ok bool) {
	var be *rpcerr.BudgetError
	if errors.As(err, &be) {
		return store.UnmetBudget, be.Error(), true
	}
	var r *reasoned
	if errors.As(err, &r) && r.reason != "" {
		return r.reason, err.Error(), true
	}
	return "", "", false
}

// publishUnmet writes the unmet status of the round's nodes where it
// changed since this run last wrote it (or since the records it found when
// it started), so an unchanged shortfall costs no write per round.
func (e *Engine) publishUnmet(ctx context.Context, rs *runState, snap *snapshot) {
	ss := e.cfg.Store
	if rs.published == nil {
		stored, err := ss.ListNodeStatus(ctx)
		if err != nil {
			e.log.Warn("reading node status", "err", err)
			return
		}
		rs.published = make(map[string]published, len(stored))
		for id, st := range stored {
			rs.published[id] = published{reason: st.Reason, message: st.Message, at: st.UpdatedAt}
		}
	}
	e.mu.Lock()
	unmet := make(map[string]error, len(e.unmet))
	for k, v := range e.unmet {
		unmet[k] = v
	}
	e.mu.Unlock()
	now := e.cfg.Clock.Now()
	for id := range rs.published {
		if _, ok := snap.node[id]; !ok {
			delete(rs.published, id) // deleted nodes take their status along
		}
	}
	for _, n := range snap.nodes {
		id := n.InstanceID
		have, had := rs.published[id]
		err, isUnmet := unmet[id]
		if !isUnmet {
			if !had {
				continue
			}
			if werr := ss.ClearNodeStatus(ctx, id); werr != nil {
				e.stopIfDeposed(rs, werr)
				e.log.Warn("clearing node status", "instance", id, "err", werr)
				continue
			}
			delete(rs.published, id)
			continue
		}
		reason, msg, ok := unmetStatus(err)
		if !ok {
			continue
		}
		if had && have.reason == reason && (have.message == msg || now.Sub(have.at) < statusRefresh) {
			continue
		}
		if werr := ss.PutNodeStatus(ctx, store.NodeStatus{InstanceID: id, Reason: reason, Message: msg, UpdatedAt: now.UTC()}); werr != nil {
			e.stopIfDeposed(rs, werr)
			e.log.Warn("publishing node status", "instance", id, "err", werr)
			continue
		}
		rs.published[id] = published{reason: reason, message: msg, at: now}
	}
}
