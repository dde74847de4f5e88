package executor

import (
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// serialStore queues the engine's writes that change a subnet's counters,
// per subnet, and commits each queue's waiting writes together in one
// transaction (batcher). A reserving BeginIntent, and
// CompleteCreate/Assign/Unassign/Delete/GiveUp and FailIntent, read and
// rewrite the subnet's record in a revision-compared transaction; sixty
// workers sending them at once mostly lose the compare and retry, and under
// a burst the store gives up. Queued here they commit first time, and
// those that queued behind one in flight share the next round trip
// instead of each waiting for every other's. Attach, modify and detach
// intents leave the subnet alone and go through unqueued. Writes of other
// processes (the reconciler, an operator's budget change) can still
// conflict now and then, which the store's retry absorbs.
//
// It also mirrors the open intents, for a round that reads the state in
// full because the engine's view is not following etcd (a round planned
// from the view takes them from the view): the engine's own begin and
// close as it writes them, and a full read (ListOpenIntents) now and then
// brings in other writers' and a previous leader's.
type serialStore struct {
	Store

	batch    *batcher
	mu       sync.Mutex
	subnetOf map[string]string // open intent -> its subnet

	open       map[string]store.Intent
	refreshing bool
	touched    map[string]bool // begun or closed while a full read was under way
}

func newSerialStore(s Store) *serialStore {
	return &serialStore{Store: s, batch: newBatcher(s), subnetOf: map[string]string{}, open: map[string]store.Intent{}}
}

// commit queues op behind the other writes to the subnet of intent id.
func (s *serialStore) commit(ctx context.Context, id string, op *store.Op) error {
	s.mu.Lock()
	subnet := s.subnetOf[id]
	s.mu.Unlock()
	return s.batch.do(ctx, subnet, op.ReadsSubnet(subnet))
}

func (s *serialStore) remember(id, subnet string) {
	s.mu.Lock()
	s.subnetOf[id] = subnet
	s.mu.Unlock()
}

// closed forgets a finished intent (one the store says is no longer open
// counts too).
func (s *serialStore) closed(id string, err error) error {
	if err == nil || errors.Is(err, rpcerr.ErrWrongState) {
		s.mu.Lock()
		delete(s.subnetOf, id)
		delete(s.open, id)
		if s.refreshing {
			s.touched[id] = true
		}
		s.mu.Unlock()
	}
	return err
}

// Follow follows the engine's records, the intents among them: a round
// planned from the view takes the open intents from it.
func (s *serialStore) Follow(ctx context.Context, opts ...store.FollowOption) *store.Follower {
	return s.Store.Follow(ctx, append(opts, store.FollowIntents())...)
}

// OpenIntents returns the mirrored open intents, oldest first.
func (s *serialStore) OpenIntents() []store.Intent {
	s.mu.Lock()
	out := make([]store.Intent, 0, len(s.open))
	for _, in := range s.open {
		out = append(out, in)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

func (s *serialStore) BeginIntent(ctx context.Context, in store.Intent) (store.Intent, error) {
	var got store.Intent
	var err error
	if in.Reserved > 0 {
		op := store.BeginOp(in)
		err = s.batch.do(ctx, in.SubnetID, op)
		got = op.Intent()
	} else {
		got, err = s.Store.BeginIntent(ctx, in)
	}
	if err == nil {
		s.remember(got.ID, got.SubnetID)
		s.mu.Lock()
		s.open[got.ID] = got
		if s.refreshing {
			s.touched[got.ID] = true
		}
		s.mu.Unlock()
	}
	return got, err
}

// ListOpenIntents reads every open intent from etcd and makes the mirror
// that, except for intents this engine began or closed during the read,
// whose mirrored state is newer.
func (s *serialStore) ListOpenIntents(ctx context.Context) ([]store.Intent, error) {
	s.mu.Lock()
	s.refreshing, s.touched = true, map[string]bool{}
	s.mu.Unlock()
	open, err := s.Store.ListOpenIntents(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshing = false
	if err != nil {
		return nil, err
	}
	mirror := make(map[string]store.Intent, len(open))
	for _, in := range open {
		if !s.touched[in.ID] {
			mirror[in.ID] = in
			s.subnetOf[in.ID] = in.SubnetID
		}
	}
	for id := range s.touched {
		if in, ok := s.open[id]; ok {
			mirror[id] = in
		}
	}
	s.open = mirror
	out := make([]store.Intent, 0, len(mirror))
	for _, in := range open {
		if _, ok := mirror[in.ID]; ok {
			out = append(out, in)
		}
	}
	return out, nil
}

func (s *serialStore) CompleteCreate(ctx context.Context, id string, eni store.ENI) error {
	return s.closed(id, s.commit(ctx, id, store.CompleteCreateOp(id, eni)))
}

func (s *serialStore) CompleteAttach(ctx context.Context, id, eniID string, deviceIndex int) error {
	return s.closed(id, s.Store.CompleteAttach(ctx, id, eniID, deviceIndex))
}

func (s *serialStore) CompleteModify(ctx context.Context, id string) error {
	return s.closed(id, s.Store.CompleteModify(ctx, id))
}

func (s *serialStore) CompleteAssign(ctx context.Context, id, eniID string, addrs, prefixes []string) error {
	return s.closed(id, s.commit(ctx, id, store.CompleteAssignOp(id, eniID, addrs, prefixes)))
}

func (s *serialStore) CompleteUnassign(ctx context.Context, id, eniID string, addrs, prefixes []string) error {
	return s.closed(id, s.commit(ctx, id, store.CompleteUnassignOp(id, eniID, addrs, prefixes)))
}

func (s *serialStore) CompleteDetach(ctx context.Context, id, eniID string) error {
	return s.closed(id, s.Store.CompleteDetach(ctx, id, eniID))
}

func (s *serialStore) CompleteDelete(ctx context.Context, id, eniID string) error {
	return s.closed(id, s.commit(ctx, id, store.CompleteDeleteOp(id, eniID)))
}

func (s *serialStore) CompleteGiveUp(ctx context.Context, id, eniID string) error {
	return s.closed(id, s.commit(ctx, id, store.CompleteGiveUpOp(id, eniID)))
}

func (s *serialStore) FailIntent(ctx context.Context, id string, cause error) error {
	return s.closed(id, s.commit(ctx, id, store.FailOp(id, cause)))
}
