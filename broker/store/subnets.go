package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// PutSubnet creates a subnet record, or updates the CIDR, zone, VPC and
// Usable of an existing one while keeping its budget (Headroom, Cap), its
// UsedByOthers and its counters. On create the budget fields are taken from
// sn and the counters start at zero: only intents move them.
func (s *Store) PutSubnet(ctx context.Context, sn Subnet) (Subnet, error) {
	if err := checkID("subnet", sn.ID); err != nil {
		return Subnet{}, err
	}
	if sn.Usable < 0 || sn.Headroom < 0 || sn.Cap < 0 || sn.UsedByOthers < 0 {
		return Subnet{}, fmt.Errorf("subnet %s: usable, headroom, cap and used-by-others must not be negative: %w", sn.ID, rpcerr.ErrInvalid)
	}
	return s.modifySubnet(ctx, "PutSubnet", sn.ID, true, func(cur *Subnet, exists bool) {
		if !exists {
			*cur = sn
			cur.Attached, cur.Reserved = 0, 0
			return
		}
		cur.CIDR, cur.AvailabilityZone, cur.VPCID, cur.Usable = sn.CIDR, sn.AvailabilityZone, sn.VPCID, sn.Usable
	})
}

// SetSubnetBudget sets the headroom kept free for others and the cluster's
// cap (0 = none). Lowering them below current use is allowed: Available
// becomes 0 and nothing new is reserved until use falls.
func (s *Store) SetSubnetBudget(ctx context.Context, id string, headroom, cap int64) (Subnet, error) {
	if err := checkID("subnet", id); err != nil {
		return Subnet{}, err
	}
	if headroom < 0 || cap < 0 {
		return Subnet{}, fmt.Errorf("subnet %s: headroom %d and cap %d must not be negative: %w", id, headroom, cap, rpcerr.ErrInvalid)
	}
	return s.modifySubnet(ctx, "SetSubnetBudget", id, false, func(cur *Subnet, _ bool) {
		cur.Headroom, cur.Cap = headroom, cap
	})
}

// SetUsedByOthers records how many of the subnet's addresses are in use
// outside the cluster (from DescribeSubnets).
func (s *Store) SetUsedByOthers(ctx context.Context, id string, n int64) (Subnet, error) {
	if err := checkID("subnet", id); err != nil {
		return Subnet{}, err
	}
	if n < 0 {
		return Subnet{}, fmt.Errorf("subnet %s: used by others %d must not be negative: %w", id, n, rpcerr.ErrInvalid)
	}
	return s.modifySubnet(ctx, "SetUsedByOthers", id, false, func(cur *Subnet, _ bool) {
		cur.UsedByOthers = n
	})
}

// SetNoPrefix records that EC2 found no free /28 in the subnet (reason is
// its answer): prefix-mode nodes get secondary addresses there until
// until. A zero until ends it.
func (s *Store) SetNoPrefix(ctx context.Context, id string, until time.Time, reason string) (Subnet, error) {
	if err := checkID("subnet", id); err != nil {
		return Subnet{}, err
	}
	return s.modifySubnet(ctx, "SetNoPrefix", id, false, func(cur *Subnet, _ bool) {
		cur.NoPrefixUntil, cur.NoPrefixReason = until.UTC(), reason
		if until.IsZero() {
			cur.NoPrefixUntil, cur.NoPrefixReason = time.Time{}, ""
		}
	})
}

// modifySubnet applies change to the current record in one compare-and-put.
func (s *Store) modifySubnet(ctx context.Context, method, id string, create bool, change func(cur *Subnet, exists bool)) (Subnet, error) {
	var out Subnet
	rev, err := s.update(ctx, method, []string{s.key(kindSubnets, id)}, nil, func(v *view) error {
		var cur Subnet
		ok, err := get(v, kindSubnets, id, &cur)
		if err != nil {
			return err
		}
		if !ok && !create {
			return fmt.Errorf("subnet %s: %w", id, rpcerr.ErrNotFound)
		}
		change(&cur, ok)
		out = cur
		return v.put(s.key(kindSubnets, id), &out)
	})
	out.Rev = rev
	return out, err
}

// GetSubnet returns one subnet.
func (s *Store) GetSubnet(ctx context.Context, id string) (Subnet, error) {
	if err := checkID("subnet", id); err != nil {
		return Subnet{}, err
	}
	var sn Subnet
	err := s.readView(ctx, []string{s.key(kindSubnets, id)}, nil, func(v *view) error {
		ok, err := get(v, kindSubnets, id, &sn)
		if err == nil && !ok {
			err = fmt.Errorf("subnet %s: %w", id, rpcerr.ErrNotFound)
		}
		return err
	})
	return sn, err
}

// ListSubnets returns every subnet, sorted by ID. One corrupt record fails
// the whole list: a budget silently missing is worse than an error.
func (s *Store) ListSubnets(ctx context.Context) ([]Subnet, error) {
	out, err := listAll[*Subnet](ctx, s, kindSubnets)
	slices.SortFunc(out, subnetsByID)
	return out, err
}

// enisByID, nodesByID and subnetsByID order the List methods' answers.
func enisByID(a, b ENI) int       { return strings.Compare(a.ID, b.ID) }
func nodesByID(a, b Node) int     { return strings.Compare(a.InstanceID, b.InstanceID) }
func subnetsByID(a, b Subnet) int { return strings.Compare(a.ID, b.ID) }

// listAll reads every record of a kind.
func listAll[P interface {
	*T
	record
}, T any](ctx context.Context, s *Store, kind string) ([]T, error) {
	var out []T
	err := s.readView(ctx, nil, []string{s.dir(kind)}, func(v *view) error {
		var err error
		out, err = list[P](v, kind)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
