package executor

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
)

// ensureInfo fills in, from EC2, what planning needs and a registration does
// not carry: instance-type limits, subnet records and the primary ENI. It
// describes in batches (one call per kind per round) and remembers failures
// so a bad ID is not described every round. It reports whether it wrote
// anything.
func (e *Engine) ensureInfo(ctx context.Context, rs *runState, snap *snapshot) (bool, error) {
	now := e.cfg.Now()
	var errs []error
	changed := false

	var types []string
	seen := map[string]bool{}
	for _, n := range snap.nodes {
		t := n.InstanceType
		if t == "" || seen[t] || e.cachedType(t) || !e.retryDue(rs, "type:"+t, now) {
			continue
		}
		if n.IPv4PerENI == 0 || n.MaxENIs == 0 || mode(n.Mode) == planner.Prefix {
			seen[t] = true
			types = append(types, t)
		}
	}
	if len(types) > 0 {
		sort.Strings(types)
		lims, err := e.ec2.DescribeInstanceTypes(ctx, types)
		if err != nil {
			errs = append(errs, fmt.Errorf("describe instance types %v: %w", types, err))
		}
		e.mu.Lock()
		for _, t := range types {
			if l, ok := lims[t]; ok {
				e.types[t] = planner.Limits{MaxENIs: l.MaxENIs, IPv4PerENI: l.IPv4PerENI, PrefixCapable: l.Nitro}
			} else {
				rs.retry["type:"+t] = now.Add(e.cfg.Interval)
			}
		}
		e.mu.Unlock()
	}
	for i, n := range snap.nodes {
		l, ok := e.cachedLimits(n.InstanceType)
		if !ok || (n.IPv4PerENI > 0 && n.MaxENIs > 0) {
			continue
		}
		// Re-read right before writing: PutNode is last-writer-wins and a
		// registration may have just changed the node.
		cur, err := e.st.GetNode(ctx, n.InstanceID)
		if err != nil {
			errs = append(errs, fmt.Errorf("read node %s: %w", n.InstanceID, err))
			continue
		}
		n = cur
		n.IPv4PerENI = l.IPv4PerENI
		if n.MaxENIs <= 0 || n.MaxENIs > l.MaxENIs {
			n.MaxENIs = l.MaxENIs
		}
		put, err := e.st.PutNode(ctx, n)
		if err != nil {
			errs = append(errs, fmt.Errorf("record limits of %s: %w", n.InstanceID, err))
			continue
		}
		snap.nodes[i], snap.node[n.InstanceID] = put, put
		changed = true
	}

	c, err := e.ensureSubnets(ctx, rs, snap, now)
	changed = changed || c
	errs = append(errs, err)
	c, err = e.ensurePrimaries(ctx, rs, snap, now)
	changed = changed || c
	errs = append(errs, err)
	return changed, errors.Join(errs...)
}

func (e *Engine) ensureSubnets(ctx context.Context, rs *runState, snap *snapshot, now time.Time) (bool, error) {
	var ids []string
	seen := map[string]bool{}
	for _, n := range snap.nodes {
		id := n.SubnetID
		if id == "" || seen[id] || !e.retryDue(rs, "subnet:"+id, now) {
			continue
		}
		if _, ok := snap.subnets[id]; !ok {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return false, nil
	}
	sort.Strings(ids)
	infos, err := describeEach(ctx, ids, e.ec2.DescribeSubnets)
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("describe subnets: %w", err))
	}
	found := map[string]bool{}
	changed := false
	for _, si := range infos {
		found[si.ID] = true
		usable, err := usableAddresses(si.CIDR)
		if err != nil {
			errs = append(errs, fmt.Errorf("subnet %s: %w", si.ID, err))
			continue
		}
		sn, err := e.st.PutSubnet(ctx, store.Subnet{ID: si.ID, CIDR: si.CIDR, AvailabilityZone: si.AZ, VPCID: si.VPCID, Usable: usable})
		if err != nil {
			errs = append(errs, fmt.Errorf("record subnet %s: %w", si.ID, err))
			continue
		}
		changed = true
		// Until the reconciler's first pass, what EC2 says is in use and is
		// not ours belongs to others (the nodes' primary ENIs among them).
		if others := usable - si.Available - sn.Attached - sn.Reserved; others > 0 && sn.UsedByOthers == 0 {
			if _, err := e.st.SetUsedByOthers(ctx, si.ID, others); err != nil {
				errs = append(errs, fmt.Errorf("record subnet %s use by others: %w", si.ID, err))
			}
		}
	}
	e.mu.Lock()
	for _, id := range ids {
		if !found[id] {
			rs.retry["subnet:"+id] = now.Add(e.cfg.Interval)
		}
	}
	e.mu.Unlock()
	return changed, errors.Join(errs...)
}

// usableAddresses is a subnet's size minus the 5 addresses AWS reserves.
func usableAddresses(cidr string) (int64, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() {
		return 0, fmt.Errorf("bad IPv4 CIDR %q", cidr)
	}
	n := int64(1)<<(32-p.Bits()) - 5
	return max(n, 0), nil
}

func (e *Engine) ensurePrimaries(ctx context.Context, rs *runState, snap *snapshot, now time.Time) (bool, error) {
	var ids []string
	var unknown, attempted []store.Node
	byENI := map[string]store.Node{}
	for _, n := range snap.nodes {
		if _, ok := snap.primary(n.InstanceID); ok || !e.retryDue(rs, "primary:"+n.InstanceID, now) {
			continue
		}
		attempted = append(attempted, n)
		if n.PrimaryENIID == "" {
			unknown = append(unknown, n)
			continue
		}
		ids = append(ids, n.PrimaryENIID)
		byENI[n.PrimaryENIID] = n
	}
	var errs []error
	var found []ec2client.ENIInfo
	if len(ids) > 0 {
		infos, err := describeEach(ctx, ids, func(ctx context.Context, ids []string) ([]ec2client.ENIInfo, error) {
			return e.ec2.DescribeENIs(ctx, ec2client.DescribeENIsInput{IDs: ids})
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("describe primary ENIs: %w", err))
		}
		found = append(found, infos...)
	}
	for _, n := range unknown {
		infos, err := e.ec2.DescribeENIs(ctx, ec2client.DescribeENIsInput{InstanceID: n.InstanceID})
		if err != nil {
			errs = append(errs, fmt.Errorf("describe ENIs of %s: %w", n.InstanceID, err))
			continue
		}
		for _, x := range infos {
			if x.DeviceIndex == 0 && x.InstanceID == n.InstanceID {
				byENI[x.ID] = n
				found = append(found, x)
			}
		}
	}
	changed := false
	done := map[string]bool{}
	for _, x := range found {
		n, ok := byENI[x.ID]
		if !ok || done[n.InstanceID] {
			continue
		}
		rec := store.ENI{
			ID: x.ID, InstanceID: n.InstanceID, SubnetID: x.SubnetID, MAC: x.MAC, DeviceIndex: 0,
			PrimaryIP: x.PrimaryIP, Addresses: x.Addresses, Prefixes: x.Prefixes,
			Primary: true, Status: store.ENIAttached, CreatedAt: now,
		}
		if err := e.st.PutPrimaryENI(ctx, rec); err != nil {
			errs = append(errs, fmt.Errorf("record primary ENI %s of %s: %w", x.ID, n.InstanceID, err))
			continue
		}
		done[n.InstanceID] = true
		changed = true
		if cur, err := e.st.GetNode(ctx, n.InstanceID); err == nil && cur.PrimaryENIID == "" {
			cur.PrimaryENIID, cur.PrimaryIP = x.ID, x.PrimaryIP
			if _, err := e.st.PutNode(ctx, cur); err != nil {
				errs = append(errs, fmt.Errorf("record primary ENI on node %s: %w", n.InstanceID, err))
			}
		}
	}
	e.mu.Lock()
	for _, n := range attempted {
		if !done[n.InstanceID] {
			rs.retry["primary:"+n.InstanceID] = now.Add(e.cfg.Interval)
		}
	}
	e.mu.Unlock()
	return changed, errors.Join(errs...)
}

// maxFilterValues is the most values EC2 accepts in one Describe filter.
const maxFilterValues = 200

// describeEach describes ids in calls of at most maxFilterValues; when EC2
// refuses a batch because one ID does not exist, it describes that batch
// one by one so the others are still found.
func describeEach[T any](ctx context.Context, ids []string, describe func(context.Context, []string) ([]T, error)) ([]T, error) {
	var out []T
	var errs []error
	for chunk := range slices.Chunk(ids, maxFilterValues) {
		got, err := describeBatch(ctx, chunk, describe)
		out = append(out, got...)
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

func describeBatch[T any](ctx context.Context, ids []string, describe func(context.Context, []string) ([]T, error)) ([]T, error) {
	out, err := describe(ctx, ids)
	if err == nil || !ec2client.IsNotFound(err) || len(ids) == 1 {
		return out, err
	}
	out = nil
	var errs []error
	for _, id := range ids {
		one, err := describe(ctx, []string{id})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, one...)
	}
	return out, errors.Join(errs...)
}

func (e *Engine) retryDue(rs *runState, key string, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !now.Before(rs.retry[key])
}

func (e *Engine) cachedType(t string) bool {
	_, ok := e.cachedLimits(t)
	return ok
}

func (e *Engine) cachedLimits(t string) (planner.Limits, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l, ok := e.types[t]
	return l, ok
}

// limits returns the planner's limits for a node: the described instance
// type, or what the node record says when the type was not described.
func (e *Engine) limits(n store.Node) (planner.Limits, bool) {
	if l, ok := e.cachedLimits(n.InstanceType); ok {
		return l, true
	}
	if n.IPv4PerENI > 0 && n.MaxENIs > 0 && mode(n.Mode) != planner.Prefix {
		return planner.Limits{MaxENIs: n.MaxENIs, IPv4PerENI: n.IPv4PerENI}, true
	}
	return planner.Limits{}, false
}
