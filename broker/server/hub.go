package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// errShuttingDown ends streams when the server stops; clients reconnect,
// to this replica or another.
var errShuttingDown = fmt.Errorf("%w: this replica is shutting down; reconnect", rpcerr.ErrUnavailable)

// catchUpEvery is how often the hub asks etcd for the watch's progress
// while a subscriber waits for a revision the mirror has not reached (a
// write outside the prefix raised it); every tenth time it reads
// everything again instead.
const catchUpEvery = 100 * time.Millisecond

// hub keeps one copy of the state every stream of this replica is computed
// from, current from the store's Follower: each changed record is read and
// decoded once, and a batch of changes costs what it changed. Changes
// arriving within coalesce of each other are published together. For each
// node the hub publishes a nodeState, replaced only when the node's
// message would change, so a change wakes only the streams of the nodes it
// touched. The whole view the budget streams need is built only while one
// watches.
type hub struct {
	st       HubStore
	log      *slog.Logger
	coalesce time.Duration
	resync   time.Duration

	mu         sync.Mutex
	rev        int64                 // every published state is exactly as of rev
	live       bool                  // following etcd; false from a break until the next full read
	nodes      map[string]*nodeState // by instance ID; written only by the loop
	flat       *view                 // kept only while budgetSubs > 0
	budgetSubs int
	want       int64         // the newest revision a subscriber waits for
	changed    chan struct{} // closed and replaced at every publish
	kick       chan struct{} // tells the loop a subscriber waits
	done       chan struct{} // closed when the loop ends
}

func newHub(st HubStore, log *slog.Logger, coalesce, resync time.Duration) *hub {
	return &hub{
		st: st, log: log, coalesce: coalesce, resync: resync,
		nodes:   map[string]*nodeState{},
		changed: make(chan struct{}),
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
}

// run follows the store until ctx ends. A periodic full read guards
// against a change the mirror could have mishandled.
func (h *hub) run(ctx context.Context) {
	defer close(h.done)
	l := &hubLoop{h: h, f: h.st.Follow(ctx), m: newMirror()}
	resync := time.NewTicker(h.resync)
	defer resync.Stop()
	defer l.stopCatchUp()
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-l.f.Updates():
			if !ok {
				return
			}
			l.update(u)
		case <-h.kick:
		case <-l.settle:
			l.settle, l.publishNow = nil, true
		case <-resync.C:
			l.f.Resync()
		case <-l.catchUpC:
			l.attempts++
			if l.attempts%10 == 0 {
				l.f.Resync()
			} else if err := l.f.RequestProgress(); err != nil {
				h.log.Debug("request watch progress", "err", err)
			}
		}
		l.step()
	}
}

// hubLoop is run's state between events.
type hubLoop struct {
	h *hub
	f *store.Follower
	m *mirror

	settle      <-chan time.Time // armed while a batch of changes settles
	catchUp     *time.Ticker
	catchUpC    <-chan time.Time
	attempts    int
	live        bool
	publishNow  bool
	liveChanged bool
}

// update applies what the follower reports to the mirror.
func (l *hubLoop) update(u store.FollowUpdate) {
	switch {
	case u.Err != nil:
		l.h.log.Warn("following the store for watchers; will read everything again", "err", u.Err)
		l.liveChanged = l.liveChanged || l.live
		l.live = false
	case u.Snapshot != nil:
		l.m.reset(u.Snapshot)
		l.liveChanged = l.liveChanged || !l.live
		l.live = true
	}
	for _, c := range u.Changes {
		l.m.apply(c)
	}
	l.m.advance(u.Rev)
}

// step publishes when a batch has settled or a watcher waits for a
// revision the mirror has reached, and asks etcd for progress while the
// mirror is behind one a watcher waits for.
func (l *hubLoop) step() {
	h, m := l.h, l.m
	h.mu.Lock()
	want, published, budgets := h.want, h.rev, h.budgetSubs > 0
	flatBehind := budgets && (h.flat == nil || h.flat.rev < want)
	h.mu.Unlock()
	caughtUp := l.live && m.rev >= want
	if l.publishNow || l.liveChanged || (caughtUp && (want > published || flatBehind)) {
		h.publish(m, l.live, budgets)
		l.settle, l.publishNow, l.liveChanged = nil, false, false
	} else if l.settle == nil && (len(m.dirty) > 0 || (budgets && m.changed)) {
		l.settle = time.After(h.coalesce)
	}
	switch {
	case l.live && m.rev < want && l.catchUpC == nil:
		if err := l.f.RequestProgress(); err != nil {
			h.log.Debug("request watch progress", "err", err)
		}
		l.catchUp = time.NewTicker(catchUpEvery)
		l.catchUpC, l.attempts = l.catchUp.C, 0
	case (!l.live || m.rev >= want) && l.catchUp != nil:
		l.stopCatchUp()
	}
}

func (l *hubLoop) stopCatchUp() {
	if l.catchUp != nil {
		l.catchUp.Stop()
		l.catchUp, l.catchUpC = nil, nil
	}
}

// publish makes the mirror's state the one subscribers see: a new
// nodeState for each dirty node whose state changed, and the whole view if
// a budget stream watches.
func (h *hub) publish(m *mirror, live, budgets bool) {
	next := map[string]*nodeState{}
	for id := range m.dirty {
		ns := m.state(id)
		// Only this goroutine writes h.nodes, so it may read it unlocked.
		if !ns.same(h.nodes[id]) {
			next[id] = ns
		}
	}
	clear(m.dirty)
	var flat *view
	if budgets {
		h.mu.Lock()
		old := h.flat
		h.mu.Unlock()
		switch {
		case m.changed || old == nil:
			flat = m.flat()
		case old.rev < m.rev:
			// Nothing it holds changed since; it is as true at m.rev.
			cp := *old
			cp.rev = m.rev
			flat = &cp
		}
	}
	m.changed = false

	h.mu.Lock()
	defer h.mu.Unlock()
	for id, ns := range next {
		if old := h.nodes[id]; old != nil {
			close(old.replaced)
		}
		if ns == nil {
			delete(h.nodes, id)
		} else {
			h.nodes[id] = ns
		}
	}
	h.rev, h.live = max(h.rev, m.rev), live
	switch {
	case h.budgetSubs == 0:
		h.flat = nil
	case flat != nil:
		h.flat = flat
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

// await registers interest in revision rev and kicks the loop.
func (h *hub) await(rev int64) {
	h.mu.Lock()
	h.want = max(h.want, rev)
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// wait blocks until ch closes, ctx ends or the hub stops.
func (h *hub) wait(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-h.done:
		return errShuttingDown
	}
}

// node returns the instance's published state (nil when the hub holds
// nothing of it) and whether the hub is following etcd. A state may be a
// little older than etcd (by the watch's delay and the coalescing); it
// never goes back in time.
func (h *hub) node(id string) (*nodeState, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nodes[id], h.live
}

// following reports whether the hub runs and follows etcd, so that a
// state it lacks may still arrive.
func (h *hub) following() bool {
	select {
	case <-h.done:
		return false
	default:
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.live
}

// nodeAsOf is node with the revision its state is exactly as of.
func (h *hub) nodeAsOf(id string) (*nodeState, int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nodes[id], h.rev, h.live
}

// nodeAt is node once the published state is at least as new as rev. It
// gives up (false) after patience, or when the hub is not following etcd.
func (h *hub) nodeAt(ctx context.Context, id string, rev int64, patience time.Duration) (*nodeState, int64, bool) {
	h.await(rev)
	timeout := time.NewTimer(patience)
	defer timeout.Stop()
	for {
		h.mu.Lock()
		ns, cur, live, changed := h.nodes[id], h.rev, h.live, h.changed
		h.mu.Unlock()
		if cur >= rev {
			return ns, cur, live
		}
		select {
		case <-changed:
		case <-timeout.C:
			return nil, 0, false
		case <-ctx.Done():
			return nil, 0, false
		case <-h.done:
			return nil, 0, false
		}
	}
}

// nodeSub is one WatchNode stream's place in the hub.
type nodeSub struct {
	h    *hub
	id   string
	min  int64 // the first state must be at least as new as this
	sent bool
	last *nodeState
}

// subscribeNode registers a stream for one node. Its first state is at
// least as new as etcd's revision now, so it reflects every write the
// client made before it asked.
func (h *hub) subscribeNode(ctx context.Context, id string) (*nodeSub, error) {
	rev, err := h.st.Revision(ctx)
	if err != nil {
		return nil, err
	}
	h.await(rev)
	return &nodeSub{h: h, id: id, min: rev}, nil
}

// next blocks until the node's state differs from the last one returned
// (the first call returns at once when the hub is new enough) and returns
// it with the revision it is as of. A stream that falls behind gets the
// latest state, never a queue of older ones.
func (s *nodeSub) next(ctx context.Context) (*nodeState, int64, error) {
	for {
		s.h.mu.Lock()
		ns, rev, wait := s.h.nodes[s.id], s.h.rev, s.h.changed
		if rev >= s.min && (!s.sent || ns != s.last) {
			s.h.mu.Unlock()
			s.sent, s.last = true, ns
			return ns, rev, nil
		}
		if rev >= s.min && ns != nil {
			// Only a change of this node can matter now.
			wait = ns.replaced
		}
		s.h.mu.Unlock()
		if err := s.h.wait(ctx, wait); err != nil {
			return nil, 0, err
		}
	}
}

// budgetSub is one WatchSubnetBudgets stream's place in the hub.
type budgetSub struct {
	h    *hub
	min  int64
	last *view
}

// subscribeBudgets registers a budget stream; call close when it ends. Its
// first view is at least as new as etcd's revision now.
func (h *hub) subscribeBudgets(ctx context.Context) (*budgetSub, error) {
	rev, err := h.st.Revision(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.budgetSubs++
	h.mu.Unlock()
	h.await(rev)
	return &budgetSub{h: h, min: rev}, nil
}

func (s *budgetSub) close() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if s.h.budgetSubs--; s.h.budgetSubs == 0 {
		s.h.flat = nil
	}
}

// next blocks until there is a whole view newer than the last one
// returned.
func (s *budgetSub) next(ctx context.Context) (*view, error) {
	for {
		s.h.mu.Lock()
		v, wait := s.h.flat, s.h.changed
		s.h.mu.Unlock()
		if v != nil && v != s.last && v.rev >= s.min {
			s.last = v
			return v, nil
		}
		if err := s.h.wait(ctx, wait); err != nil {
			return nil, err
		}
	}
}
