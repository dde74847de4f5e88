package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/allotnet/allot/broker/server/rpcerr"
)

// errShuttingDown ends streams when the server stops; clients reconnect,
// to this replica or another.
var errShuttingDown = fmt.Errorf("%w: this replica is shutting down; reconnect", rpcerr.ErrUnavailable)

// hub turns the store's change notifications into views shared by every
// stream of this replica: one etcd read per batch of changes, however many
// agents and planners are watching, and none while nobody watches. Changes
// arriving within coalesce of each other are read once.
type hub struct {
	st       Store
	log      *slog.Logger
	coalesce time.Duration
	resync   time.Duration

	mu      sync.Mutex
	cur     *view
	started uint64        // loads started
	subs    int           // streams waiting for views
	changed chan struct{} // closed and replaced when cur is replaced
	kick    chan struct{} // asks the loop for a load
	done    chan struct{} // closed when the loop ends
}

func newHub(st Store, log *slog.Logger, coalesce, resync time.Duration) *hub {
	return &hub{
		st: st, log: log, coalesce: coalesce, resync: resync,
		changed: make(chan struct{}),
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
}

// run loads views until ctx ends. A periodic resync guards against a change
// the watch could have missed while it was being (re)established.
func (h *hub) run(ctx context.Context) {
	defer close(h.done)
	watch := h.st.Watch(ctx)
	resync := time.NewTicker(h.resync)
	defer resync.Stop()
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-watch:
			if !ok {
				if ctx.Err() != nil {
					return
				}
				h.log.Warn("store watch closed; re-establishing")
				watch = h.st.Watch(ctx)
			}
		case <-h.kick:
		case <-resync.C:
		case <-retry:
		}
		retry = nil
		if !h.watched() {
			continue
		}
		// Let a burst of changes settle into one read.
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.coalesce):
		}
		drain(watch)
		if err := h.load(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			h.log.Warn("load state for watchers", "err", err)
			retry = time.After(time.Second)
		}
	}
}

func drain(ch <-chan int64) {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

func (h *hub) watched() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.subs > 0
}

func (h *hub) load(ctx context.Context) error {
	h.mu.Lock()
	h.started++
	seq := h.started
	h.mu.Unlock()
	v, err := loadView(ctx, h.st)
	if err != nil {
		return err
	}
	v.seq = seq
	h.mu.Lock()
	h.cur = v
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
	return nil
}

func (h *hub) requestLoad() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// subscription is one stream's place in the hub.
type subscription struct {
	h    *hub
	last *view
	min  uint64 // the first view must come from a load started after this
}

// subscribe registers a stream; call close when it ends. Its first view is
// read after the subscription, so it reflects every write the client made
// before it asked.
func (h *hub) subscribe() *subscription {
	h.mu.Lock()
	h.subs++
	s := &subscription{h: h, min: h.started}
	h.mu.Unlock()
	h.requestLoad()
	return s
}

func (s *subscription) close() {
	s.h.mu.Lock()
	s.h.subs--
	s.h.mu.Unlock()
}

// next blocks until there is a view newer than the last one returned.
func (s *subscription) next(ctx context.Context) (*view, error) {
	for {
		s.h.mu.Lock()
		cur, changed := s.h.cur, s.h.changed
		s.h.mu.Unlock()
		if cur != nil && cur != s.last && cur.seq > s.min {
			s.last = cur
			return cur, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.h.done:
			return nil, errShuttingDown
		}
	}
}
