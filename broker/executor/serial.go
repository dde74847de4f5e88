package executor

import (
	"context"
	"sync"

	"github.com/allotnet/allot/broker/store"
)

// serialStore lets only one of the engine's writes that change a subnet's
// counters reach etcd at a time, per subnet. A reserving BeginIntent, and
// CompleteCreate/Assign/Unassign/Delete and FailIntent, read and rewrite
// the subnet's record in a revision-compared transaction; sixty workers
// sending them at once mostly lose the compare and retry, and under a burst
// the store gives up. Queued here they commit first time. Attach, modify
// and detach intents leave the subnet alone and go through unqueued. Writes of
// other processes (the reconciler, an operator's budget change) can still
// conflict now and then, which the store's retry absorbs.
type serialStore struct {
	Store

	mu       sync.Mutex
	locks    map[string]*sync.Mutex
	subnetOf map[string]string // open intent -> its subnet
}

func newSerialStore(s Store) *serialStore {
	return &serialStore{Store: s, locks: map[string]*sync.Mutex{}, subnetOf: map[string]string{}}
}

func (s *serialStore) lockSubnet(subnet string) func() {
	s.mu.Lock()
	l, ok := s.locks[subnet]
	if !ok {
		l = &sync.Mutex{}
		s.locks[subnet] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (s *serialStore) lockIntent(id string) func() {
	s.mu.Lock()
	subnet := s.subnetOf[id]
	s.mu.Unlock()
	return s.lockSubnet(subnet)
}

func (s *serialStore) remember(id, subnet string) {
	s.mu.Lock()
	s.subnetOf[id] = subnet
	s.mu.Unlock()
}

// closed forgets a finished intent.
func (s *serialStore) closed(id string, err error) error {
	if err == nil {
		s.mu.Lock()
		delete(s.subnetOf, id)
		s.mu.Unlock()
	}
	return err
}

func (s *serialStore) BeginIntent(ctx context.Context, in store.Intent) (store.Intent, error) {
	if in.Reserved > 0 {
		defer s.lockSubnet(in.SubnetID)()
	}
	got, err := s.Store.BeginIntent(ctx, in)
	if err == nil {
		s.remember(got.ID, got.SubnetID)
	}
	return got, err
}

func (s *serialStore) ListOpenIntents(ctx context.Context) ([]store.Intent, error) {
	open, err := s.Store.ListOpenIntents(ctx)
	for _, in := range open {
		s.remember(in.ID, in.SubnetID)
	}
	return open, err
}

func (s *serialStore) CompleteCreate(ctx context.Context, id string, eni store.ENI) error {
	defer s.lockIntent(id)()
	return s.closed(id, s.Store.CompleteCreate(ctx, id, eni))
}

func (s *serialStore) CompleteAttach(ctx context.Context, id, eniID string, deviceIndex int) error {
	return s.closed(id, s.Store.CompleteAttach(ctx, id, eniID, deviceIndex))
}

func (s *serialStore) CompleteModify(ctx context.Context, id string) error {
	return s.closed(id, s.Store.CompleteModify(ctx, id))
}

func (s *serialStore) CompleteAssign(ctx context.Context, id, eniID string, addrs, prefixes []string) error {
	defer s.lockIntent(id)()
	return s.closed(id, s.Store.CompleteAssign(ctx, id, eniID, addrs, prefixes))
}

func (s *serialStore) CompleteUnassign(ctx context.Context, id, eniID string, addrs, prefixes []string) error {
	defer s.lockIntent(id)()
	return s.closed(id, s.Store.CompleteUnassign(ctx, id, eniID, addrs, prefixes))
}

func (s *serialStore) CompleteDetach(ctx context.Context, id, eniID string) error {
	return s.closed(id, s.Store.CompleteDetach(ctx, id, eniID))
}

func (s *serialStore) CompleteDelete(ctx context.Context, id, eniID string) error {
	defer s.lockIntent(id)()
	return s.closed(id, s.Store.CompleteDelete(ctx, id, eniID))
}

func (s *serialStore) FailIntent(ctx context.Context, id string, cause error) error {
	defer s.lockIntent(id)()
	return s.closed(id, s.Store.FailIntent(ctx, id, cause))
}
