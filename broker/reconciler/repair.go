package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// unknownInstance stands in for the node of a leaked ENI that lost its
// instance tag (an intent must name a node).
const unknownInstance = "unknown-instance"

// repair acts on a pass's findings, recording on each what was done.
// Sightings not repeated on this pass are forgotten: "seen twice" means on
// two consecutive passes.
func (r *Reconciler) repair(ctx context.Context, o *observation, rep *Report) {
	seen := map[string]map[string]bool{}
	mark := func(kind, id string) {
		if seen[kind] == nil {
			seen[kind] = map[string]bool{}
		}
		seen[kind][id] = true
	}
	// EC2 showing none of our instances, or none of our ENIs, is far more
	// likely a wrong filter, account or region than a mass termination.
	// Missing evidence is not evidence of absence: nothing is released then.
	implausible := map[string]bool{
		KindInstanceGone: len(o.nodes) >= 2 && rep.Count(KindInstanceGone) == len(o.nodes),
		KindMissingENI:   len(o.records) >= 2 && rep.Count(KindMissingENI) == len(o.records),
	}
	for kind, bad := range implausible {
		if bad {
			r.log.Error("EC2 shows none of the cluster's records; refusing to act on it", "kind", kind)
		}
	}
	subnetActions := map[string]map[string]string{}
	for i := range rep.Findings {
		f := &rep.Findings[i]
		if implausible[f.Kind] {
			f.Action = ActionSkipped
			continue
		}
		switch f.Kind {
		case KindLeakedENI:
			mark(f.Kind, f.ENIID)
			f.Action = r.collectLeak(ctx, o, f)
		case KindMissingENI:
			mark(f.Kind, f.ENIID)
			f.Action = r.forgetMissing(ctx, o, f)
		case KindInstanceGone:
			mark(f.Kind, f.InstanceID)
			f.Action = r.releaseGone(ctx, o, f)
		case KindSubnetUse, KindSubnetRecord:
			if _, ok := subnetActions[f.SubnetID]; !ok {
				subnetActions[f.SubnetID] = r.correctSubnet(ctx, o, f.SubnetID)
			}
			f.Action = subnetActions[f.SubnetID][f.Kind]
		}
		if f.Action == ActionFailed {
			r.count(func(s *Stats) { s.Errors++ })
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for kind, m := range map[string]map[string]sighting{KindLeakedENI: r.leaks, KindMissingENI: r.missing, KindInstanceGone: r.gone} {
		for id := range m {
			if !seen[kind][id] {
				delete(m, id)
			}
		}
	}
}

// sight records one more pass that saw key and says whether it has now been
// seen on two passes at least Grace apart.
func (r *Reconciler) sight(m map[string]sighting, key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := m[key]
	if !ok {
		s.first = now
	}
	s.passes++
	m[key] = s
	return s.passes >= 2 && now.Sub(s.first) >= r.cfg.Grace
}

func (r *Reconciler) unsight(m map[string]sighting, key string) {
	r.mu.Lock()
	delete(m, key)
	r.mu.Unlock()
}

// collectLeak deletes a leaked ENI: only an available one, with our cluster
// and owner tags, seen on two passes, and only if describing it again right
// before the delete still shows it so and etcd still has neither a record
// nor an open intent for it.
func (r *Reconciler) collectLeak(ctx context.Context, o *observation, f *Finding) string {
	x := o.tagged[f.ENIID]
	if !r.collectable(x) {
		return ActionReported // attached or not plainly ours: for the operator
	}
	if !r.sight(r.leaks, x.ID, o.at) {
		return ActionWatching
	}
	if r.cfg.DryRun {
		return ActionReported
	}
	cur, found, err := r.describeOne(ctx, x.ID)
	if err != nil {
		r.log.Warn("re-describing leaked ENI", "eni", x.ID, "err", err)
		return ActionFailed
	}
	if !found {
		r.unsight(r.leaks, x.ID)
		return ActionSkipped
	}
	if !r.collectable(cur) {
		return ActionSkipped
	}
	if claimed, err := r.claimedNow(ctx, cur); err != nil || claimed {
		if err != nil {
			r.log.Warn("re-checking etcd for leaked ENI", "eni", x.ID, "err", err)
			return ActionFailed
		}
		return ActionSkipped
	}
	inst := cur.Tags[ec2client.TagInstanceID]
	if inst == "" {
		inst = unknownInstance
	}
	err = r.deleteBehindIntent(ctx, store.ENI{ID: cur.ID, InstanceID: inst, SubnetID: cur.SubnetID}, true)
	if err != nil {
		r.log.Warn("collecting leaked ENI", "eni", x.ID, "err", err)
		return ActionFailed
	}
	r.unsight(r.leaks, x.ID)
	r.count(func(s *Stats) { s.Collected++ })
	r.log.Info("leaked ENI collected", "eni", x.ID, "instance", inst, "subnet", cur.SubnetID)
	return ActionCollected
}

// collectable is the leak collector's test of an ENI as EC2 shows it.
func (r *Reconciler) collectable(x ec2client.ENIInfo) bool {
	return x.Status == "available" && x.AttachmentID == "" &&
		x.Tags[ec2client.TagCluster] == r.cfg.Cluster && x.Tags[ec2client.TagOwner] == ec2client.OwnerValue
}

// claimedNow reads etcd again: does a record or an open intent claim x?
func (r *Reconciler) claimedNow(ctx context.Context, x ec2client.ENIInfo) (bool, error) {
	_, err := r.cfg.Store.GetENI(ctx, x.ID)
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, rpcerr.ErrNotFound):
		return false, err
	}
	open, err := r.cfg.Store.ListOpenIntents(ctx)
	if err != nil {
		return false, err
	}
	tok := x.Tags[executor.TagClientToken]
	for _, in := range open {
		if in.ENIID == x.ID || (tok != "" && in.Kind == store.IntentCreate && (in.ClientToken == tok || in.ID == tok)) {
			return true, nil
		}
	}
	return false, nil
}

// forgetMissing removes the record of an ENI that EC2 did not show on two
// passes (nor when described once more), behind a delete intent that never
// reaches EC2, so the removal and its reason are on record.
func (r *Reconciler) forgetMissing(ctx context.Context, o *observation, f *Finding) string {
	rec := o.records[f.ENIID]
	if o.at.Sub(rec.CreatedAt) < r.cfg.Grace {
		return ActionWatching // EC2 may not show a new ENI yet
	}
	if !r.sight(r.missing, rec.ID, o.at) {
		return ActionWatching
	}
	if r.cfg.DryRun {
		return ActionReported
	}
	if _, found, err := r.describeOne(ctx, rec.ID); err != nil || found {
		if err != nil {
			return ActionFailed
		}
		r.unsight(r.missing, rec.ID)
		return ActionSkipped
	}
	if err := r.deleteBehindIntent(ctx, rec, false); err != nil {
		r.log.Warn("removing record of missing ENI", "eni", rec.ID, "err", err)
		return ActionFailed
	}
	r.unsight(r.missing, rec.ID)
	r.count(func(s *Stats) { s.Forgotten++ })
	return ActionForgotten
}

// releaseGone releases the ENIs of a node whose instance EC2 reported gone
// on two passes (and once more right now): records of ENIs EC2 no longer
// has are removed, our available ENIs are deleted, and then the node's
// registration. Anything EC2 still shows attached stops it for this pass.
func (r *Reconciler) releaseGone(ctx context.Context, o *observation, f *Finding) string {
	id := f.InstanceID
	if !r.sight(r.gone, id, o.at) {
		return ActionWatching
	}
	if r.cfg.DryRun {
		return ActionReported
	}
	if o.openNode[id] {
		return ActionSkipped
	}
	insts, err := r.cfg.EC2.DescribeInstances(ctx, []string{id})
	if err != nil {
		return ActionFailed
	}
	for _, i := range insts {
		if i.ID == id && i.State != "terminated" {
			r.unsight(r.gone, id)
			return ActionSkipped
		}
	}
	var recs []store.ENI
	var ids []string
	for _, e := range o.records {
		if e.InstanceID == id {
			recs = append(recs, e)
			ids = append(ids, e.ID)
		}
	}
	now := map[string]ec2client.ENIInfo{}
	xs, err := r.cfg.EC2.DescribeENIs(ctx, ec2client.DescribeENIsInput{IDs: ids})
	if err != nil {
		return ActionFailed
	}
	for _, x := range xs {
		now[x.ID] = x
	}
	done := true
	for _, rec := range recs {
		x, found := now[rec.ID]
		var err error
		switch {
		case !found:
			err = r.deleteBehindIntent(ctx, rec, false)
		case x.Status == "available" && x.AttachmentID == "" && !rec.Primary:
			err = r.deleteBehindIntent(ctx, rec, true)
		case x.Status == "available" && x.AttachmentID == "":
			// A primary ENI is the instance's, not ours to delete.
			err = r.deleteBehindIntent(ctx, rec, false)
		default:
			r.log.Info("ENI of a gone instance not yet free; retrying next pass", "eni", rec.ID, "instance", id,
				"status", x.Status, "attached_to", x.InstanceID)
			done = false
			continue
		}
		if err != nil {
			r.log.Warn("releasing ENI of gone instance", "eni", rec.ID, "instance", id, "err", err)
			done = false
		}
	}
	if !done {
		return ActionFailed
	}
	if err := r.cfg.Store.DeleteNode(ctx, id); err != nil && !errors.Is(err, rpcerr.ErrNotFound) {
		r.log.Warn("removing node of gone instance", "instance", id, "err", err)
		return ActionFailed
	}
	r.unsight(r.gone, id)
	r.count(func(s *Stats) { s.NodesRemoved++ })
	r.log.Info("gone instance released", "instance", id, "enis", len(recs))
	return ActionReleased
}

// correctSubnet sets a subnet record to what EC2 and the ENI and intent
// records say, in one transaction (store.CorrectSubnet), and logs each
// corrected figure with both values. It returns the action taken for each
// of the two subnet finding kinds.
func (r *Reconciler) correctSubnet(ctx context.Context, o *observation, id string) map[string]string {
	out := map[string]string{KindSubnetRecord: ActionReported, KindSubnetUse: ActionReported}
	x, ok := o.subnetsEC[id]
	if !ok || r.cfg.DryRun {
		return out
	}
	t, attached, reserved := o.subnetTruth(id, x)
	if t.Usable < 0 {
		return out // a CIDR EC2 gave that does not parse: report only
	}
	if reserved > 0 && !o.recordDrifts(id, x) {
		// EC2 calls in flight move the subnet's use while they last; the
		// store would leave the use by others alone for that reason too,
		// after reading every ENI and intent record to find out.
		out[KindSubnetUse] = ActionSkipped
		return out
	}
	c, err := r.cfg.Store.CorrectSubnet(ctx, id, t, attached)
	if err != nil {
		r.log.Warn("correcting subnet record", "subnet", id, "err", err)
		return map[string]string{KindSubnetRecord: ActionFailed, KindSubnetUse: ActionFailed}
	}
	b, a := c.Before, c.After
	if b.Usable != a.Usable || b.Attached != a.Attached || b.Reserved != a.Reserved || b.CIDR != a.CIDR ||
		b.AvailabilityZone != a.AvailabilityZone || b.VPCID != a.VPCID {
		out[KindSubnetRecord] = ActionCorrected
		r.log.Warn("subnet record disagreed; corrected", "subnet", id, "corrected", c.Corrected,
			"usable_was", b.Usable, "usable", a.Usable, "attached_was", b.Attached, "attached", a.Attached,
			"reserved_was", b.Reserved, "reserved", a.Reserved, "cidr_was", b.CIDR, "cidr", a.CIDR)
	}
	switch {
	case b.UsedByOthers != a.UsedByOthers:
		out[KindSubnetUse] = ActionUpdated
		r.count(func(s *Stats) { s.SubnetsUpdated++ })
	case c.OthersSkipped:
		out[KindSubnetUse] = ActionSkipped
	}
	return out
}

// deleteBehindIntent writes a delete intent, deletes the ENI in EC2 when
// inEC2 (NotFound counts as deleted), and completes the intent, which
// removes the record (if any) and its addresses from the subnet's count.
func (r *Reconciler) deleteBehindIntent(ctx context.Context, e store.ENI, inEC2 bool) error {
	in, err := r.cfg.Store.BeginIntent(ctx, store.Intent{
		ID: executor.NewIntentID(executor.ReconcilerIntentPrefix), Kind: store.IntentDelete,
		InstanceID: e.InstanceID, ENIID: e.ID, SubnetID: e.SubnetID,
	})
	if err != nil {
		return fmt.Errorf("begin delete intent for %s: %w", e.ID, err)
	}
	if inEC2 {
		if err := r.cfg.EC2.DeleteENI(ctx, e.ID); err != nil && !ec2client.IsNotFound(err) {
			if ec2client.Code(err) != "" {
				if ferr := r.cfg.Store.FailIntent(ctx, in.ID, err); ferr != nil {
					err = errors.Join(err, ferr)
				}
			}
			return fmt.Errorf("delete ENI %s: %w", e.ID, err)
		}
	}
	if err := r.cfg.Store.CompleteDelete(ctx, in.ID, e.ID); err != nil {
		return fmt.Errorf("record delete of %s: %w", e.ID, err)
	}
	return nil
}

func (r *Reconciler) describeOne(ctx context.Context, id string) (ec2client.ENIInfo, bool, error) {
	xs, err := r.cfg.EC2.DescribeENIs(ctx, ec2client.DescribeENIsInput{IDs: []string{id}})
	if err != nil {
		return ec2client.ENIInfo{}, false, err
	}
	for _, x := range xs {
		if x.ID == id {
			return x, true, nil
		}
	}
	return ec2client.ENIInfo{}, false, nil
}
