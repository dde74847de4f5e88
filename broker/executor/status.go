package executor

import (
	"context"
	"errors"
	"log/slog"
	"sync"
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

// pendingStatus is a reason not yet published and since when it holds.
type pendingStatus struct {
	reason string
	since  time.Time
}

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

// unmetBook is why each node's demand is unmet now: kept for Unmet, logged
// once per new reason, and published to etcd (store.NodeStatus) where it
// changed, for WatchNode to pass on to the node's agent.
type unmetBook struct {
	log *slog.Logger

	mu       sync.Mutex
	unmet    map[string]error
	reported map[string]string // node -> last reason logged, this run
	// published is the status last written per node; nil until the first
	// publish of a run reads what is stored (only the round goroutine
	// touches it, as pending).
	published map[string]published
	// pending is each node's reason that is not published yet, and since
	// when it holds.
	pending map[string]pendingStatus
	// hold is how long a new reason must hold before it is published: a
	// node that is full for a moment, while its agent has not yet counted
	// the ENI just attached, costs no write and no clear.
	hold time.Duration
}

func newUnmetBook(log *slog.Logger, hold time.Duration) *unmetBook {
	return &unmetBook{log: log, unmet: map[string]error{}, reported: map[string]string{}, pending: map[string]pendingStatus{}, hold: hold}
}

// startRun forgets what was logged and published: a new run reads what is
// stored and logs afresh.
func (u *unmetBook) startRun() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reported, u.published, u.pending = map[string]string{}, nil, map[string]pendingStatus{}
}

// set records (nil: clears) why a node's demand is unmet, logging each new
// reason once.
func (u *unmetBook) set(node string, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err == nil {
		delete(u.unmet, node)
		delete(u.reported, node)
		return
	}
	u.unmet[node] = err
	key := reasonKey(err)
	if u.reported[node] == key {
		return
	}
	u.reported[node] = key
	var be *rpcerr.BudgetError
	if errors.As(err, &be) {
		u.log.Warn("demand unmet: subnet budget exhausted", "instance", node, "subnet", be.SubnetID,
			"limit", be.Limit, "use", be.Use, "requested", be.Requested)
		return
	}
	u.log.Info("demand unmet", "instance", node, "reason", err)
}

// clear is set(node, nil) for each of nodes, under one lock.
func (u *unmetBook) clear(nodes []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, n := range nodes {
		delete(u.unmet, n)
		delete(u.reported, n)
	}
}

func reasonKey(err error) string {
	var be *rpcerr.BudgetError
	if errors.As(err, &be) {
		return "budget:" + be.SubnetID
	}
	return err.Error()
}

// all returns a copy of the unmet reasons by node.
func (u *unmetBook) all() map[string]error {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]error, len(u.unmet))
	for k, v := range u.unmet {
		out[k] = v
	}
	return out
}

// publish writes the unmet status of the round's nodes (ids) where it changed
// since this run last wrote it (or since the records it found when it
// started), so an unchanged shortfall costs no write per round. failed
// sees each write that failed.
func (u *unmetBook) publish(ctx context.Context, ss NodeStatus, ids []string, now time.Time, failed func(error)) {
	if u.published == nil {
		stored, err := ss.ListNodeStatus(ctx)
		if err != nil {
			u.log.Warn("reading node status", "err", err)
			return
		}
		u.published = make(map[string]published, len(stored))
		for id, st := range stored {
			u.published[id] = published{reason: st.Reason, message: st.Message, at: st.UpdatedAt}
		}
	}
	unmet := u.all()
	present := make(map[string]bool, len(ids))
	for _, id := range ids {
		present[id] = true
	}
	for id := range u.published {
		if !present[id] {
			delete(u.published, id) // deleted nodes take their status along
		}
	}
	for id := range u.pending {
		if !present[id] {
			delete(u.pending, id)
		}
	}
	for _, id := range ids {
		if err := u.publishOne(ctx, ss, id, unmet, now); err != nil {
			failed(err)
		}
	}
}

// publishOne writes or clears one node's status if it changed: a new
// reason once it has held for u.hold, a clear at once.
func (u *unmetBook) publishOne(ctx context.Context, ss NodeStatus, id string, unmet map[string]error, now time.Time) error {
	have, had := u.published[id]
	err, isUnmet := unmet[id]
	reason, msg, ok := unmetStatus(err)
	if !ok {
		delete(u.pending, id)
	}
	if !isUnmet {
		if !had {
			return nil
		}
		if werr := ss.ClearNodeStatus(ctx, id); werr != nil {
			u.log.Warn("clearing node status", "instance", id, "err", werr)
			return werr
		}
		delete(u.published, id)
		return nil
	}
	if !ok {
		return nil
	}
	if had && have.reason == reason {
		if have.message == msg || now.Sub(have.at) < statusRefresh {
			return nil
		}
	} else if !u.held(id, reason, now) {
		return nil
	}
	if werr := ss.PutNodeStatus(ctx, store.NodeStatus{InstanceID: id, Reason: reason, Message: msg, UpdatedAt: now.UTC()}); werr != nil {
		u.log.Warn("publishing node status", "instance", id, "err", werr)
		return werr
	}
	u.published[id] = published{reason: reason, message: msg, at: now}
	delete(u.pending, id)
	return nil
}

// held reports whether the node's new reason has held for u.hold, noting
// when it was first seen.
func (u *unmetBook) held(id, reason string, now time.Time) bool {
	p, ok := u.pending[id]
	if !ok || p.reason != reason {
		p = pendingStatus{reason: reason, since: now}
		u.pending[id] = p
	}
	return now.Sub(p.since) >= u.hold
}
