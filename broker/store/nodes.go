package store

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// PutNode registers a node or updates its registration. Registering again
// is idempotent; the first RegisteredAt is kept. A registration that
// changes nothing writes nothing (agents register again on every
// reconnection, thousands at once after a broker's restart, when etcd is
// busiest) and returns the revision it read.
func (s *Store) PutNode(ctx context.Context, n Node) (Node, error) {
	if err := checkID("node", n.InstanceID); err != nil {
		return Node{}, err
	}
	if n.MaxENIs < 0 || n.IPv4PerENI < 0 || n.WarmIPTarget < 0 || n.MinimumIPTarget < 0 || n.WarmENITarget < 0 || n.WarmPrefixTarget < 0 {
		return Node{}, fmt.Errorf("node %s: limits and warm targets must not be negative: %w", n.InstanceID, rpcerr.ErrInvalid)
	}
	key := s.key(kindNodes, n.InstanceID)
	var same int64 // the record's revision when it is already what n is
	rev, err := s.update(ctx, "PutNode", []string{key}, nil, func(v *view) error {
		var cur Node
		ok, err := get(v, kindNodes, n.InstanceID, &cur)
		if err != nil {
			return err
		}
		switch {
		case ok && !cur.RegisteredAt.IsZero():
			n.RegisteredAt = cur.RegisteredAt
		case n.RegisteredAt.IsZero():
			n.RegisteredAt = time.Now().UTC()
		}
		wrote, err := v.putChanged(key, &n)
		if same = 0; err == nil && !wrote {
			same = cur.Rev
		}
		return err
	})
	n.Rev = rev
	if same != 0 {
		n.Rev = same
	}
	return n, err
}

// GetNode returns one node.
func (s *Store) GetNode(ctx context.Context, id string) (Node, error) {
	return getOne[*Node](ctx, s, kindNodes, "node", id)
}

// ListNodes returns every node, sorted by instance id.
func (s *Store) ListNodes(ctx context.Context) ([]Node, error) {
	out, err := listAll[*Node](ctx, s, kindNodes)
	slices.SortFunc(out, nodesByID)
	return out, err
}

// DeleteNode removes the node's registration, its demand (so the planner
// stops serving it), its alive key, its status and its usage report, so an
// instance that comes back starts from a clean record (a stale report with
// a huge sequence number would otherwise hide every later one). Its ENIs
// and releases stay: taking addresses back is the reconciler's job, through
// recorded evidence.
func (s *Store) DeleteNode(ctx context.Context, id string) error {
	if err := checkID("node", id); err != nil {
		return err
	}
	key := s.key(kindNodes, id)
	_, err := s.update(ctx, "DeleteNode", []string{key}, nil, func(v *view) error {
		kv, err := v.raw(key)
		if err != nil {
			return err
		}
		if kv == nil {
			return fmt.Errorf("node %s: %w", id, rpcerr.ErrNotFound)
		}
		v.del(key)
		v.del(s.key(kindDemand, id))
		v.del(s.key(kindAlive, id))
		v.del(s.key(kindStatus, id))
		v.del(s.key(kindUsage, id))
		return nil
	})
	if err == nil {
		s.live.forget(id)
	}
	return err
}

// PutDemand stores a node's latest demand (last writer wins: only the node's
// own agent states it). The node must be registered.
func (s *Store) PutDemand(ctx context.Context, d Demand) error {
	errs, err := s.PutDemands(ctx, []Demand{d})
	if err != nil {
		return err
	}
	return errs[0]
}

// MaxDemands is the most demands PutDemands writes in one transaction:
// each reads its node's key and writes its demand, and etcd refuses a
// transaction of more than 128 compares or operations (its --max-txn-ops
// default).
const MaxDemands = 100

// PutDemands stores several nodes' demands as PutDemand does, in one
// transaction for up to MaxDemands of them (several in turn for more), and
// returns each one's own outcome, in order: a demand that is not valid or
// whose node is not registered is refused alone. Of two demands of one
// node the later is written (last writer wins). err is a failure of the
// whole write (etcd), which every demand not refused on its own shares.
func (s *Store) PutDemands(ctx context.Context, ds []Demand) (errs []error, err error) {
	errs = make([]error, len(ds))
	for lo := 0; lo < len(ds); lo += MaxDemands {
		hi := min(lo+MaxDemands, len(ds))
		if e := s.putDemands(ctx, ds[lo:hi], errs[lo:hi]); e != nil && err == nil {
			err = e
		}
	}
	return errs, err
}

func (s *Store) putDemands(ctx context.Context, ds []Demand, errs []error) error {
	last := map[string]int{} // node -> the index of its last valid demand
	var keys []string
	for i := range ds {
		d := &ds[i]
		if errs[i] = checkDemand(d); errs[i] != nil {
			continue
		}
		if d.UpdatedAt.IsZero() {
			d.UpdatedAt = time.Now().UTC()
		}
		if _, seen := last[d.InstanceID]; !seen {
			keys = append(keys, s.key(kindNodes, d.InstanceID))
		}
		last[d.InstanceID] = i
	}
	if len(keys) == 0 {
		return nil
	}
	_, err := s.update(ctx, "PutDemand", keys, nil, func(v *view) error {
		for id, i := range last {
			if errs[i] = requireNode(v, s.key(kindNodes, id), id); errs[i] == nil {
				errs[i] = v.put(s.key(kindDemand, id), &ds[i])
			}
		}
		return nil
	})
	for _, i := range last {
		if err != nil && errs[i] == nil {
			errs[i] = err
		}
	}
	for j := range ds {
		// One written over by its node's later demand shares that one's fate.
		if i, ok := last[ds[j].InstanceID]; ok && i != j && errs[j] == nil {
			errs[j] = errs[i]
		}
	}
	return err
}

// checkDemand refuses a demand with no valid node ID or a negative count.
func checkDemand(d *Demand) error {
	if err := checkID("demand", d.InstanceID); err != nil {
		return err
	}
	if d.Pending < 0 || d.WarmShortfall < 0 || d.Known < 0 {
		return fmt.Errorf("demand of %s: pending %d, warm shortfall %d and known %d must not be negative: %w",
			d.InstanceID, d.Pending, d.WarmShortfall, d.Known, rpcerr.ErrInvalid)
	}
	return nil
}

// ListDemands returns every stored demand by instance id.
func (s *Store) ListDemands(ctx context.Context) (map[string]Demand, error) {
	ds, err := listAll[*Demand](ctx, s, kindDemand)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Demand, len(ds))
	for _, d := range ds {
		out[d.InstanceID] = d
	}
	return out, nil
}

// PutUsage stores a node's usage report unless one with the same or a
// higher Seq is already stored (reports can arrive out of order through
// reconnects); applied says which. The node must be registered.
func (s *Store) PutUsage(ctx context.Context, u Usage) (bool, error) {
	if err := checkID("usage", u.InstanceID); err != nil {
		return false, err
	}
	if err := checkUsage(u); err != nil {
		return false, err
	}
	if u.UpdatedAt.IsZero() {
		u.UpdatedAt = time.Now().UTC()
	}
	nodeKey, key := s.key(kindNodes, u.InstanceID), s.key(kindUsage, u.InstanceID)
	applied := false
	_, err := s.update(ctx, "PutUsage", []string{nodeKey, key}, nil, func(v *view) error {
		applied = false
		if err := requireNode(v, nodeKey, u.InstanceID); err != nil {
			return err
		}
		var cur Usage
		ok, err := get(v, kindUsage, u.InstanceID, &cur)
		if err != nil {
			return err
		}
		if ok && u.Seq <= cur.Seq {
			return nil
		}
		if ok && u.Seq-cur.Seq > seqWindow(cur.UpdatedAt, u.UpdatedAt) {
			return fmt.Errorf("usage of %s: seq jumps from %d to %d, more than an agent reports in %s: %w",
				u.InstanceID, cur.Seq, u.Seq, u.UpdatedAt.Sub(cur.UpdatedAt).Round(time.Second), rpcerr.ErrInvalid)
		}
		applied = true
		return v.put(key, &u)
	})
	return applied && err == nil, err
}

// seqWindow is how far a usage report's seq may run ahead of the recorded
// one: an agent numbers its reports one by one, at most a few a second, so
// a jump beyond what the time between them allows (plus slack for a
// restart from a checkpoint) is not an honest report. Refusing it keeps a
// single report with seq 2^64-1 from hiding every later one.
func seqWindow(prev, now time.Time) uint64 {
	const slack, perSecond = 1 << 16, 100
	secs := max(now.Sub(prev).Seconds(), 0)
	return slack + uint64(secs*perSecond)
}

// checkUsage rejects reports with unparsable addresses or an address both
// assigned and free.
func checkUsage(u Usage) error {
	seen := make(map[netip.Addr]bool, len(u.Assigned))
	for _, a := range u.Assigned {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return fmt.Errorf("usage of %s: assigned address %q: %w", u.InstanceID, a, rpcerr.ErrInvalid)
		}
		seen[ip] = true
	}
	for _, a := range u.Free {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return fmt.Errorf("usage of %s: free address %q: %w", u.InstanceID, a, rpcerr.ErrInvalid)
		}
		if seen[ip] {
			return fmt.Errorf("usage of %s: address %s is both assigned and free: %w", u.InstanceID, a, rpcerr.ErrInvalid)
		}
	}
	if u.Excess < 0 || u.Excess > len(u.Free) {
		return fmt.Errorf("usage of %s: excess %d is not a count of the %d free addresses: %w", u.InstanceID, u.Excess, len(u.Free), rpcerr.ErrInvalid)
	}
	return nil
}

// GetUsage returns a node's latest usage report.
func (s *Store) GetUsage(ctx context.Context, id string) (Usage, error) {
	return getOne[*Usage](ctx, s, kindUsage, "usage of node", id)
}

// ListUsage returns every node's latest usage report by instance id.
func (s *Store) ListUsage(ctx context.Context) (map[string]Usage, error) {
	us, err := listAll[*Usage](ctx, s, kindUsage)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Usage, len(us))
	for _, u := range us {
		out[u.InstanceID] = u
	}
	return out, nil
}

// requireNode fails with rpcerr.ErrNotFound unless the node at nodeKey exists.
func requireNode(v *view, nodeKey, id string) error {
	kv, err := v.raw(nodeKey)
	if err != nil {
		return err
	}
	if kv == nil {
		return fmt.Errorf("node %s is not registered: %w", id, rpcerr.ErrNotFound)
	}
	return nil
}

// getOne reads one record of a kind; rpcerr.ErrNotFound if absent.
func getOne[P interface {
	*T
	record
}, T any](ctx context.Context, s *Store, kind, what, id string) (T, error) {
	var out T
	if err := checkID(what, id); err != nil {
		return out, err
	}
	err := s.readView(ctx, []string{s.key(kind, id)}, nil, func(v *view) error {
		ok, err := get(v, kind, id, P(&out))
		if err == nil && !ok {
			err = fmt.Errorf("%s %s: %w", what, id, rpcerr.ErrNotFound)
		}
		return err
	})
	return out, err
}
