package world

import (
	"maps"
	"slices"
	"time"

	"github.com/allotnet/allot/awssim/imds"
)

var _ imds.Source = (*World)(nil)

// imdsHistory is what IMDS could show for one instance: snapshots of its
// network state, oldest first, each stamped with when EC2 applied it.
type imdsHistory struct {
	snaps []imdsSnap
}

type imdsSnap struct {
	at time.Time
	md imds.Metadata
}

// recordIMDSLocked appends the instance's current state to its history.
func (w *World) recordIMDSLocked(instanceID string, now time.Time) {
	inst, ok := w.instances[instanceID]
	if !ok {
		return
	}
	h := w.imds[instanceID]
	if h == nil {
		h = &imdsHistory{}
		w.imds[instanceID] = h
	}
	md := imds.Metadata{
		InstanceID: inst.id, InstanceType: inst.typ, AvailabilityZone: inst.az,
		AccountID: w.accountID, ImageID: inst.imageID, PendingTime: inst.launch,
	}
	for _, i := range slices.Sorted(maps.Keys(inst.enis)) {
		e := inst.enis[i]
		v := w.vpcs[e.subnet.vpcID]
		ifc := imds.Interface{
			MAC: e.mac, ENIID: e.id, DeviceNumber: i, SubnetID: e.subnet.id,
			SubnetCIDR: e.subnet.pool.cidr.String(), VPCID: v.id,
			SecurityGroupIDs: slices.Clone(e.groups),
		}
		for _, c := range v.cidrs {
			ifc.VPCCIDRs = append(ifc.VPCCIDRs, c.String())
		}
		for _, a := range e.ips {
			ifc.LocalIPv4s = append(ifc.LocalIPv4s, a.String())
		}
		for _, p := range e.prefixes {
			ifc.IPv4Prefixes = append(ifc.IPv4Prefixes, p.String())
		}
		if i == 0 {
			md.MAC, md.LocalIPv4 = e.mac, e.ips[0].String()
		}
		md.Interfaces = append(md.Interfaces, ifc)
	}
	h.snaps = append(h.snaps, imdsSnap{at: now, md: md})
	w.pruneIMDSLocked(h, now)
}

// pruneIMDSLocked drops snapshots that can no longer be shown: all but the
// newest one already older than the lag.
func (w *World) pruneIMDSLocked(h *imdsHistory, now time.Time) {
	cutoff := now.Add(-w.imdsLag)
	keep := 0
	for i, s := range h.snaps {
		if !s.at.After(cutoff) {
			keep = i
		}
	}
	if keep > 0 {
		h.snaps = slices.Delete(h.snaps, 0, keep)
	}
}

// Metadata implements imds.Source: what the instance's IMDS shows now, which
// is EC2's state as it was IMDSLag ago. An instance shows its launch state
// until its first change is older than the lag.
func (w *World) Metadata(instanceID string) (imds.Metadata, bool) {
	var (
		md imds.Metadata
		ok bool
	)
	_ = w.do(func(now time.Time) error {
		h := w.imds[instanceID]
		if h == nil || len(h.snaps) == 0 || w.instances[instanceID] == nil {
			return nil
		}
		w.pruneIMDSLocked(h, now)
		md, ok = h.snaps[0].md, true
		return nil
	})
	return md, ok
}

// SetIMDSLag changes the lag of IMDS behind EC2.
func (w *World) SetIMDSLag(d time.Duration) {
	w.mu.Lock()
	w.imdsLag = max(d, 0)
	w.mu.Unlock()
}

// IMDSLag returns the lag of IMDS behind EC2.
func (w *World) IMDSLag() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.imdsLag
}
