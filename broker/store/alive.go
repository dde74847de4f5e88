package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Node liveness costs etcd a write when a node's state changes, not per
// heartbeat. A Store (one broker replica) holds one etcd lease per TTL and
// hangs the alive key of every node whose heartbeats reach it on that
// lease, written once. Later heartbeats only refresh the replica's memory;
// the shared lease is renewed once per TTL/3 while any heartbeat arrives.
// A node whose heartbeats stop is found by the replica's sweep (every
// TTL/2, on the heartbeats of the others) and its key deleted; if every
// heartbeat stops, or the replica dies, the lease expires and takes the
// keys with it. A node that moves to another replica has its key moved to
// that replica's lease, and the old replica's sweep deletes a key only
// while it still hangs on its own lease.

// The shared lease's renewal is the replica's, not the heartbeat's: it
// goes out in a goroutine of its own with a timeout of its own, so a
// heartbeat neither waits for etcd nor takes the renewal down with it when
// its caller gives up (an agent's call times out while etcd is busy), and
// a renewal that etcd holds up does not hold up the next one (at most
// renewalsInFlight at once). The lease is granted once however many
// heartbeats find none at the same moment (the first heartbeats after the
// replica starts, or after its lease expired): each would otherwise grant
// a lease of its own, a write each on an etcd that is already behind, and
// revoke it again.

// renewalsInFlight bounds the renewals of one shared lease under way at
// once.
const renewalsInFlight = 2

// liveGroup is this replica's lease for one TTL and the nodes on it.
type liveGroup struct {
	id       clientv3.LeaseID
	renewed  time.Time
	renewing int  // renewals under way
	checking bool // a heartbeat renews in its call (renewNow)
	// acked is when the latest renewal etcd acknowledged was sent (the
	// grant's time before the first): the lease lives at least a TTL
	// from then.
	acked    time.Time
	swept    time.Time
	sweeping bool
	// seen is the last heartbeat of every node whose alive key this
	// replica wrote on the lease.
	seen map[string]time.Time
}

// liveness is a Store's liveness groups, by TTL.
type liveness struct {
	mu     sync.Mutex
	groups map[time.Duration]*liveGroup
	// granting is the grant under way for a TTL with no group yet.
	granting map[time.Duration]*grant
}

// grant is a lease grant that the heartbeats finding no group share.
type grant struct {
	done chan struct{} // closed when id or err is set
	id   clientv3.LeaseID
	err  error
}

// forget drops a node from every group (its key is gone).
func (l *liveness) forget(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, g := range l.groups {
		delete(g.seen, id)
	}
}

// KeepAlive says the node is alive for ttl more. The first heartbeat a
// replica sees from a node writes its alive/<id> key (the node must be
// registered); later ones cost etcd nothing but the replica's shared lease
// renewal.
func (s *Store) KeepAlive(ctx context.Context, instanceID string, ttl time.Duration) error {
	if err := checkID("node", instanceID); err != nil {
		return err
	}
	if ttl < time.Second {
		return fmt.Errorf("keepalive of %s: ttl %s is under 1s: %w", instanceID, ttl, rpcerr.ErrInvalid)
	}
	now := time.Now()
	s.live.mu.Lock()
	g := s.live.groups[ttl]
	if g == nil {
		s.live.mu.Unlock()
		return s.recordAlive(ctx, instanceID, ttl)
	}
	if _, ok := g.seen[instanceID]; !ok {
		s.live.mu.Unlock()
		return s.recordAlive(ctx, instanceID, ttl)
	}
	g.seen[instanceID] = now
	if now.Sub(g.acked) >= ttl && !g.checking {
		// No renewal acknowledged for a TTL (no heartbeat came, or etcd
		// did not answer): the lease may be gone with every key on it.
		// Renew here, so that if it is, this node is recorded again now
		// rather than at its next heartbeat. One heartbeat at a time: on
		// an etcd too slow to answer, the others do not wait for it.
		g.checking = true
		lease := g.id
		s.live.mu.Unlock()
		return s.renewNow(ctx, instanceID, ttl, g, lease, now)
	}
	renew := now.Sub(g.renewed) >= ttl/3 && g.renewing < renewalsInFlight
	if renew {
		g.renewed = now
		g.renewing++
	}
	if !g.sweeping && now.Sub(g.swept) >= ttl/2 {
		g.sweeping, g.swept = true, now
		go s.sweepAlive(ttl, g)
	}
	s.live.mu.Unlock()
	if renew {
		go s.renewGroup(ttl, g, now)
	}
	return nil
}

// renewGroup renews the group's shared lease, started at now, with a
// timeout of its own: a renewal answered after the TTL is of no use. If
// the lease is gone, the group is dropped and the next heartbeat of each
// node writes its key on a new lease; after any other failure the next
// heartbeat renews again.
func (s *Store) renewGroup(ttl time.Duration, g *liveGroup, started time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), ttl)
	defer cancel()
	s.countWrite("KeepAliveRenew")
	_, err := s.cli.KeepAliveOnce(ctx, g.id)
	s.live.mu.Lock()
	g.renewing--
	switch {
	case err == nil:
		g.acked = later(g.acked, started)
	case g.renewed.Equal(started):
		g.renewed = time.Time{}
	}
	s.live.mu.Unlock()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// The lease expired: every key on it is gone.
		s.dropGroup(ttl, g.id)
	}
}

// renewNow renews the group's lease in the heartbeat's call, sent at now;
// if it is gone, it records the node on a new one.
func (s *Store) renewNow(ctx context.Context, instanceID string, ttl time.Duration, g *liveGroup, lease clientv3.LeaseID, now time.Time) error {
	s.countWrite("KeepAliveRenew")
	_, err := s.cli.KeepAliveOnce(ctx, lease)
	s.live.mu.Lock()
	g.checking = false
	if err == nil {
		g.acked, g.renewed = later(g.acked, now), later(g.renewed, now)
	}
	s.live.mu.Unlock()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		// The lease expired: every key on it is gone; start a new one.
		s.dropGroup(ttl, lease)
		return s.recordAlive(ctx, instanceID, ttl)
	default:
		return fmt.Errorf("keepalive of %s: renew lease: %w", instanceID, err)
	}
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// recordAlive writes the node's alive key on this replica's lease for ttl,
// on a new lease if that one expired.
func (s *Store) recordAlive(ctx context.Context, instanceID string, ttl time.Duration) error {
	err := s.recordAliveOn(ctx, instanceID, ttl)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		err = s.recordAliveOn(ctx, instanceID, ttl)
	}
	return err
}

func (s *Store) recordAliveOn(ctx context.Context, instanceID string, ttl time.Duration) error {
	lease, err := s.groupLease(ctx, ttl)
	if err != nil {
		return fmt.Errorf("keepalive of %s: %w", instanceID, err)
	}
	nodeKey := s.key(kindNodes, instanceID)
	_, err = s.update(ctx, "KeepAlive", []string{nodeKey}, nil, func(v *view) error {
		if err := requireNode(v, nodeKey, instanceID); err != nil {
			return err
		}
		return v.put(s.key(kindAlive, instanceID), &Liveness{InstanceID: instanceID, Since: time.Now().UTC()}, clientv3.WithLease(lease))
	})
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.dropGroup(ttl, lease)
	}
	if err != nil {
		return err
	}
	s.live.mu.Lock()
	if g := s.live.groups[ttl]; g != nil && g.id == lease {
		g.seen[instanceID] = time.Now()
	}
	s.live.mu.Unlock()
	return nil
}

// groupLease returns this replica's lease for ttl, granting it first if
// there is none. Heartbeats that find none at once share one grant, and
// nothing waits for etcd while holding the liveness lock.
func (s *Store) groupLease(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, error) {
	s.live.mu.Lock()
	if g := s.live.groups[ttl]; g != nil {
		s.live.mu.Unlock()
		return g.id, nil
	}
	gr := s.live.granting[ttl]
	if gr == nil {
		gr = &grant{done: make(chan struct{})}
		if s.live.granting == nil {
			s.live.granting = map[time.Duration]*grant{}
		}
		s.live.granting[ttl] = gr
		// The grant is the replica's, not this heartbeat's: it does not
		// end when this caller gives up on it.
		go s.grantGroup(ttl, gr)
	}
	s.live.mu.Unlock()
	select {
	case <-gr.done:
		if gr.err != nil {
			return 0, gr.err
		}
		return gr.id, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("grant liveness lease: %w", ctx.Err())
	}
}

// grantGroup grants the shared lease for ttl and makes it the group's.
func (s *Store) grantGroup(ttl time.Duration, gr *grant) {
	ctx, cancel := context.WithTimeout(context.Background(), max(ttl, 10*time.Second))
	defer cancel()
	s.countWrite("KeepAliveGrant")
	sent := time.Now()
	resp, err := s.cli.Grant(ctx, int64((ttl+time.Second-1)/time.Second))
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	delete(s.live.granting, ttl)
	defer close(gr.done)
	if err != nil {
		gr.err = fmt.Errorf("grant liveness lease: %w", err)
		return
	}
	// No group for ttl was made meanwhile: only a grant makes one, and
	// there is one grant at a time for a TTL (s.live.granting).
	gr.id = resp.ID
	now := time.Now()
	s.live.groups[ttl] = &liveGroup{id: resp.ID, renewed: now, acked: sent, swept: now, seen: map[string]time.Time{}}
}

// dropGroup forgets the lease for ttl if it is still lease.
func (s *Store) dropGroup(ttl time.Duration, lease clientv3.LeaseID) {
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	if g := s.live.groups[ttl]; g != nil && g.id == lease {
		delete(s.live.groups, ttl)
	}
}

// sweepAlive deletes the alive keys of the group's nodes whose heartbeats
// stopped more than ttl ago, and forgets the nodes whose key is no longer
// on the group's lease (deleted with their node, or moved to another
// replica), so their next heartbeat here writes it again.
func (s *Store) sweepAlive(ttl time.Duration, g *liveGroup) {
	ctx, cancel := context.WithTimeout(context.Background(), ttl)
	defer cancel()
	defer func() {
		s.live.mu.Lock()
		g.sweeping = false
		s.live.mu.Unlock()
	}()
	// The keys still on the lease come from etcd's lease table, held in
	// its memory, rather than a range over every alive key of the cluster
	// (thousands of keys read and sent every TTL/2, most of them other
	// nodes' or unchanged). An expired lease has none: every node is
	// forgotten, and its next heartbeat writes its key on a new lease.
	resp, err := s.cli.TimeToLive(ctx, g.id, clientv3.WithAttachedKeys())
	if err != nil {
		return
	}
	onLease := make(map[string]bool, len(resp.Keys))
	for _, k := range resp.Keys {
		onLease[string(k)] = true
	}
	now := time.Now()
	var dead []string
	s.live.mu.Lock()
	for id, last := range g.seen {
		switch {
		case !onLease[s.key(kindAlive, id)]:
			delete(g.seen, id)
		case now.Sub(last) > ttl:
			dead = append(dead, id)
			delete(g.seen, id)
		}
	}
	s.live.mu.Unlock()
	for _, id := range dead {
		key := s.key(kindAlive, id)
		s.countWrite("AliveExpire")
		// Only while the key is still this replica's: the node may have
		// moved to another one.
		_, _ = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", g.id)).Then(clientv3.OpDelete(key)).Commit()
	}
}

// Alive returns the nodes whose alive key exists. The key names the node,
// so only the keys are read: a scrape of the cluster's gauges reads no
// node's liveness record, and a record that does not decode makes no
// difference to whether its node is alive.
func (s *Store) Alive(ctx context.Context) (map[string]bool, error) {
	dir := s.dir(kindAlive)
	resp, err := s.cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("list alive nodes: %w", err)
	}
	out := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if id := strings.TrimPrefix(string(kv.Key), dir); id != "" {
			out[id] = true
		}
	}
	return out, nil
}
