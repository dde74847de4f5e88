package instances

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/store"
)

// ensurePrimaries describes the primary ENI of each node that has none
// recorded (by its ID when the agent registered it, else by the instance's
// device index 0) and records it.
func (m *Manager) ensurePrimaries(ctx context.Context, v View, now time.Time) (bool, error) {
	var attempted []store.Node
	for _, n := range v.Nodes {
		if !v.HasPrimary(n.InstanceID) && m.due("primary:"+n.InstanceID, now) {
			attempted = append(attempted, n)
		}
	}
	found, byENI, err := m.describePrimaries(ctx, attempted)
	errs := []error{err}
	changed := false
	done := map[string]bool{}
	for _, x := range found {
		n, ok := byENI[x.ID]
		if !ok || done[n.InstanceID] {
			continue
		}
		recorded, err := m.recordPrimary(ctx, n, x, now)
		errs = append(errs, err)
		if recorded {
			done[n.InstanceID] = true
			changed = true
		}
	}
	for _, n := range attempted {
		if !done[n.InstanceID] {
			m.missed(now, "primary:"+n.InstanceID)
		}
	}
	return changed, errors.Join(errs...)
}

// describePrimaries describes the nodes' primary ENIs and returns them with
// the node each belongs to.
func (m *Manager) describePrimaries(ctx context.Context, nodes []store.Node) ([]ec2client.ENIInfo, map[string]store.Node, error) {
	var ids []string
	var unknown []store.Node
	byENI := map[string]store.Node{}
	for _, n := range nodes {
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
			return m.ec2.DescribeENIs(ctx, ec2client.DescribeENIsInput{IDs: ids})
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("describe primary ENIs: %w", err))
		}
		found = append(found, infos...)
	}
	for _, n := range unknown {
		infos, err := m.ec2.DescribeENIs(ctx, ec2client.DescribeENIsInput{InstanceID: n.InstanceID})
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
	return found, byENI, errors.Join(errs...)
}

// recordPrimary records x as n's primary ENI, and on the node when the
// agent did not name it. recorded says whether the ENI record was written.
func (m *Manager) recordPrimary(ctx context.Context, n store.Node, x ec2client.ENIInfo, now time.Time) (recorded bool, err error) {
	rec := store.ENI{
		ID: x.ID, InstanceID: n.InstanceID, SubnetID: x.SubnetID, MAC: x.MAC, DeviceIndex: 0,
		PrimaryIP: x.PrimaryIP, Addresses: x.Addresses, Prefixes: x.Prefixes,
		Primary: true, Status: store.ENIAttached, CreatedAt: now,
	}
	if err := m.st.PutPrimaryENI(ctx, rec); err != nil {
		return false, fmt.Errorf("record primary ENI %s of %s: %w", x.ID, n.InstanceID, err)
	}
	cur, err := m.st.GetNode(ctx, n.InstanceID)
	if err != nil || cur.PrimaryENIID != "" {
		return true, nil
	}
	cur.PrimaryENIID, cur.PrimaryIP = x.ID, x.PrimaryIP
	if _, err := m.st.PutNode(ctx, cur); err != nil {
		return true, fmt.Errorf("record primary ENI on node %s: %w", n.InstanceID, err)
	}
	return true, nil
}
