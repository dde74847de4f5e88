package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// lease is the etcd lease this Store holds for one node's alive key. It is a
// cache: losing it (a restart, a new leader) only costs a new Grant.
type lease struct {
	id  clientv3.LeaseID
	ttl time.Duration
}

// KeepAlive says the node is alive for ttl more: its alive/<id> key exists
// while the lease behind it is renewed. The first call (or one after the
// lease expired) grants a lease and writes the key; later calls only renew.
// The node must be registered.
func (s *Store) KeepAlive(ctx context.Context, instanceID string, ttl time.Duration) error {
	if err := checkID("node", instanceID); err != nil {
		return err
	}
	if ttl < time.Second {
		return fmt.Errorf("keepalive of %s: ttl %s is under 1s: %w", instanceID, ttl, rpcerr.ErrInvalid)
	}
	s.mu.Lock()
	l, ok := s.leases[instanceID]
	s.mu.Unlock()
	if ok && l.ttl == ttl {
		s.countWrite("KeepAliveRenew")
		_, err := s.cli.KeepAliveOnce(ctx, l.id)
		if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return fmt.Errorf("keepalive of %s: renew lease: %w", instanceID, err)
		}
		if err == nil {
			// The lease lives; make sure the key still hangs on it (DeleteNode
			// removes it, another broker may have moved it to its own lease).
			resp, err := s.cli.Get(ctx, s.key(kindAlive, instanceID))
			if err != nil {
				return fmt.Errorf("keepalive of %s: %w", instanceID, err)
			}
			if len(resp.Kvs) == 1 && clientv3.LeaseID(resp.Kvs[0].Lease) == l.id {
				return nil
			}
		}
	}
	nodeKey := s.key(kindNodes, instanceID)
	if err := s.readView(ctx, []string{nodeKey}, nil, func(v *view) error {
		return requireNode(v, nodeKey, instanceID)
	}); err != nil {
		return fmt.Errorf("keepalive: %w", err)
	}
	s.countWrite("KeepAliveGrant")
	g, err := s.cli.Grant(ctx, int64((ttl+time.Second-1)/time.Second))
	if err != nil {
		return fmt.Errorf("keepalive of %s: grant lease: %w", instanceID, err)
	}
	_, err = s.update(ctx, "KeepAlive", []string{nodeKey}, nil, func(v *view) error {
		if err := requireNode(v, nodeKey, instanceID); err != nil {
			return err
		}
		return v.put(s.key(kindAlive, instanceID), &Liveness{InstanceID: instanceID, Since: time.Now().UTC()}, clientv3.WithLease(g.ID))
	})
	if err != nil {
		// Don't leave an unused lease behind for its whole TTL.
		_, _ = s.cli.Revoke(context.WithoutCancel(ctx), g.ID)
		return err
	}
	s.mu.Lock()
	old, had := s.leases[instanceID]
	s.leases[instanceID] = lease{id: g.ID, ttl: ttl}
	s.mu.Unlock()
	if had && old.id != g.ID {
		// The key moved to the new lease, so revoking the old one deletes nothing.
		_, _ = s.cli.Revoke(context.WithoutCancel(ctx), old.id)
	}
	return nil
}

// Alive returns the nodes whose alive key exists (lease not expired).
func (s *Store) Alive(ctx context.Context) (map[string]bool, error) {
	ls, err := listAll[*Liveness](ctx, s, kindAlive)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(ls))
	for _, l := range ls {
		out[l.InstanceID] = true
	}
	return out, nil
}
