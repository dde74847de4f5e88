package store

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// Weight is how many subnet addresses the ENI counts for in
// Subnet.Attached: its primary address (not for a node's primary ENI, which
// the cluster didn't create), its secondary addresses and 16 per prefix.
func (e ENI) Weight() int64 {
	w := int64(allotv1.PodAddresses(len(e.Addresses), len(e.Prefixes)))
	if !e.Primary {
		w++
	}
	return w
}

// PutPrimaryENI records a node's primary ENI. Its own address is not counted
// in the subnet's Attached (the cluster didn't create it); addresses given
// when the record is first written are, as are those assigned later. An
// update changes MAC, device index, primary IP and status only: the
// address lists are the intents' to change.
func (s *Store) PutPrimaryENI(ctx context.Context, e ENI) error {
	if err := checkID("eni", e.ID); err != nil {
		return err
	}
	if err := checkID("node", e.InstanceID); err != nil {
		return err
	}
	if err := checkAddrs("eni "+e.ID, e.Addresses, e.Prefixes); err != nil {
		return err
	}
	e.Primary = true
	if e.Status == "" {
		e.Status = ENIAttached
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = time.Now().UTC()
	}
	key := s.key(kindENIs, e.ID)
	_, err := s.update(ctx, "PutPrimaryENI", []string{key}, nil, func(v *view) error {
		var cur ENI
		ok, err := get(v, kindENIs, e.ID, &cur)
		if err != nil {
			return err
		}
		if ok {
			if cur.InstanceID != e.InstanceID {
				return fmt.Errorf("eni %s belongs to %s, not %s: %w", e.ID, cur.InstanceID, e.InstanceID, rpcerr.ErrNotOwner)
			}
			if !cur.Primary {
				return fmt.Errorf("eni %s is recorded as a secondary ENI the broker created: %w", e.ID, rpcerr.ErrInvalid)
			}
			cur.MAC, cur.DeviceIndex, cur.PrimaryIP, cur.Status = e.MAC, e.DeviceIndex, e.PrimaryIP, e.Status
			return v.put(key, &cur)
		}
		if w := e.Weight(); w > 0 {
			if err := checkID("subnet of eni "+e.ID, e.SubnetID); err != nil {
				return err
			}
			l := newLedger(v)
			if err := l.attach(e.SubnetID, w); err != nil {
				return err
			}
			if err := l.flush(); err != nil {
				return err
			}
		}
		return v.put(key, &e)
	})
	return err
}

// GetENI returns one ENI record.
func (s *Store) GetENI(ctx context.Context, id string) (ENI, error) {
	return getOne[*ENI](ctx, s, kindENIs, "eni", id)
}

// ListENIs returns every ENI record, sorted by ID.
func (s *Store) ListENIs(ctx context.Context) ([]ENI, error) {
	out, err := listAll[*ENI](ctx, s, kindENIs)
	slices.SortFunc(out, enisByID)
	return out, err
}

// ListNodeENIs returns one node's ENIs: the primary first, then by device
// index (an ENI not yet attached has index 0), then by ID. It reads all
// ENI records (they are keyed by ENI, not by node); a reader that follows
// etcd asks NodeENIsSince instead.
func (s *Store) ListNodeENIs(ctx context.Context, instanceID string) ([]ENI, error) {
	if err := checkID("node", instanceID); err != nil {
		return nil, err
	}
	all, err := listAll[*ENI](ctx, s, kindENIs)
	if err != nil {
		return nil, err
	}
	var out []ENI
	for _, e := range all {
		if e.InstanceID == instanceID {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, nodeENIOrder)
	return out, nil
}

// NodeENIsSince returns one node's ENIs (ordered as ListNodeENIs) and the
// revision they are as of, given what a reader following etcd held of them
// as of revision since: known must be exactly the node's ENI records at
// since. It reads, in one transaction, the known ENIs' keys and the ENI
// records written after since (etcd filters by revision before it sends
// them), instead of every ENI of the cluster: a known ENI that is gone is
// absent from the first, an ENI the node gained is in the second, and the
// result is as exact as ListNodeENIs at the transaction's revision. Since
// 0 knows nothing and reads every ENI.
func (s *Store) NodeENIsSince(ctx context.Context, instanceID string, known []ENI, since int64) ([]ENI, int64, error) {
	if err := checkID("node", instanceID); err != nil {
		return nil, 0, err
	}
	if len(known) >= maxKnownENIs {
		known, since = nil, 0 // more than one transaction may hold
	}
	dir := s.dir(kindENIs)
	ops := make([]clientv3.Op, 0, len(known)+1)
	for _, e := range known {
		ops = append(ops, clientv3.OpGet(s.key(kindENIs, e.ID)))
	}
	ops = append(ops, clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithMinModRev(since+1)))
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("etcd read of %s's enis: %w", instanceID, err)
	}
	byID := map[string]ENI{}
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().GetKvs() {
			key := string(kv.Key)
			var e ENI
			if err := decode(key, kv.Value, kv.ModRevision, strings.TrimPrefix(key, dir), &e); err != nil {
				return nil, 0, err
			}
			if e.InstanceID == instanceID {
				byID[e.ID] = e
			}
		}
	}
	out := slices.Collect(maps.Values(byID))
	slices.SortFunc(out, nodeENIOrder)
	return out, resp.Header.Revision, nil
}

// maxKnownENIs bounds the keys NodeENIsSince reads by name: etcd takes 128
// operations in one transaction by default, and no instance type has more
// than 15 ENIs.
const maxKnownENIs = 100

// nodeENIOrder is a node's ENIs' order: the primary first, then by device
// index, then by ID.
func nodeENIOrder(a, b ENI) int {
	return cmp.Or(boolFirst(a.Primary, b.Primary), cmp.Compare(a.DeviceIndex, b.DeviceIndex), strings.Compare(a.ID, b.ID))
}

// checkAddrs rejects anything that isn't an IPv4 address or a /28 prefix.
func checkAddrs(what string, addrs, prefixes []string) error {
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil || !ip.Is4() {
			return fmt.Errorf("%s: %q is not an IPv4 address: %w", what, a, rpcerr.ErrInvalid)
		}
	}
	for _, p := range prefixes {
		pf, err := netip.ParsePrefix(p)
		if err != nil || !pf.Addr().Is4() || pf.Bits() != 28 || pf.Masked() != pf {
			return fmt.Errorf("%s: %q is not an IPv4 /28 prefix: %w", what, p, rpcerr.ErrInvalid)
		}
	}
	return nil
}

// union returns have plus the members of add it lacks, sorted.
func union(have, add []string) []string {
	out := slices.Clone(have)
	for _, a := range add {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.Sort(out)
	return out
}

// boolFirst orders true before false.
func boolFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// minus returns have without the members of drop.
func minus(have, drop []string) []string {
	var out []string
	for _, h := range have {
		if !slices.Contains(drop, h) {
			out = append(out, h)
		}
	}
	return out
}

// subset returns the first member of sub missing from of, or "".
func missingFrom(sub, of []string) string {
	for _, s := range sub {
		if !slices.Contains(of, s) {
			return s
		}
	}
	return ""
}
