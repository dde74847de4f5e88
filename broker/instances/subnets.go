package instances

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/allotnet/allot/broker/store"
)

// ensureSubnets describes the nodes' subnets that have no record yet and
// records them with their usable size.
func (m *Manager) ensureSubnets(ctx context.Context, v View, now time.Time) (bool, error) {
	var ids []string
	seen := map[string]bool{}
	for _, n := range v.Nodes {
		id := n.SubnetID
		if id == "" || seen[id] || !m.due("subnet:"+id, now) {
			continue
		}
		if _, ok := v.Subnets[id]; !ok {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return false, nil
	}
	sort.Strings(ids)
	infos, err := describeEach(ctx, ids, m.ec2.DescribeSubnets)
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
		sn, err := m.st.PutSubnet(ctx, store.Subnet{ID: si.ID, CIDR: si.CIDR, AvailabilityZone: si.AZ, VPCID: si.VPCID, Usable: usable})
		if err != nil {
			errs = append(errs, fmt.Errorf("record subnet %s: %w", si.ID, err))
			continue
		}
		changed = true
		// Until the reconciler's first pass, what EC2 says is in use and is
		// not ours belongs to others (the nodes' primary ENIs among them).
		if others := usable - si.Available - sn.Attached - sn.Reserved; others > 0 && sn.UsedByOthers == 0 {
			if _, err := m.st.SetUsedByOthers(ctx, si.ID, others); err != nil {
				errs = append(errs, fmt.Errorf("record subnet %s use by others: %w", si.ID, err))
			}
		}
	}
	for _, id := range ids {
		if !found[id] {
			m.missed(now, "subnet:"+id)
		}
	}
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
