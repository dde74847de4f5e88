package executor

import (
	"context"
	"fmt"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/store"
)

// giveUp gives back an ENI whose every address and prefix the agent
// acknowledged in release r, none held by a pod: DetachNetworkInterface now
// and, once EC2 reports the ENI available, DeleteNetworkInterface
// (deleteDetached), which frees its addresses; no Unassign. Both calls go
// behind intents that name the release, so the store checks again that the
// release covers everything the ENI's record lists, and a new leader
// finishes what a crashed one began (resolveDetach, resolveDelete). The
// release stays acknowledged until the delete is recorded, and is done in
// the same transaction that drops the ENI's record (store.CompleteGiveUp).
//
// done is false when the ENI must not be given up whole after all: EC2
// shows it without this cluster's tags (an ENI allot did not create is
// never deleted), attached elsewhere, or carrying an address or prefix the
// release does not cover. The caller then unassigns what was acknowledged
// and keeps the ENI.
func (e *Engine) giveUp(ctx context.Context, rs *runState, r store.Release, eni store.ENI) (done bool, err error) {
	x, found, err := e.describeOne(ctx, eni.ID)
	if err != nil {
		return true, err
	}
	if !found {
		return true, e.forget(ctx, rs, eni, r.ID, "ENI given up by a release no longer exists in EC2")
	}
	if why := e.cannotGiveUp(x, eni, r); why != "" {
		e.log.Warn("ENI not given up whole; its acknowledged addresses are unassigned instead",
			"instance", eni.InstanceID, "eni", eni.ID, "release", r.ID, "why", why)
		return false, nil
	}
	in, err := e.begin(ctx, rs, store.Intent{
		Kind: store.IntentDetach, InstanceID: eni.InstanceID, ENIID: eni.ID, SubnetID: eni.SubnetID, ReleaseID: r.ID,
	})
	if err != nil {
		return true, err
	}
	defer rs.own(in.ID, false)
	if x.AttachmentID != "" {
		if err := e.ec2.DetachENI(ctx, x.AttachmentID, false); err != nil {
			e.fail(ctx, in, err)
			return true, fmt.Errorf("detach ENI %s given up by release %s: %w", eni.ID, r.ID, err)
		}
	}
	if err := e.st.CompleteDetach(ctx, in.ID, eni.ID); err != nil {
		return true, fmt.Errorf("record detach of %s: %w", eni.ID, err)
	}
	e.log.Info("ENI given up whole: detached, to be deleted", "instance", eni.InstanceID, "eni", eni.ID, "release", r.ID,
		"addresses", len(eni.Addresses), "prefixes", len(eni.Prefixes))
	return true, nil
}

// cannotGiveUp says why EC2's view of an ENI forbids deleting it for
// release r, or "" when nothing does.
func (e *Engine) cannotGiveUp(x ec2client.ENIInfo, eni store.ENI, r store.Release) string {
	switch {
	case x.Tags[ec2client.TagCluster] != e.cfg.Cluster || x.Tags[ec2client.TagOwner] != ec2client.OwnerValue:
		return "EC2 shows it without this cluster's tags: allot did not create it"
	case x.AttachmentID != "" && x.InstanceID != eni.InstanceID:
		return fmt.Sprintf("EC2 shows it attached to %s, not %s", x.InstanceID, eni.InstanceID)
	}
	if a := minus(x.Addresses, r.AckedAddrs); len(a) > 0 {
		return fmt.Sprintf("EC2 shows address %s on it, which the release does not cover", a[0])
	}
	if p := minus(x.Prefixes, r.AckedPfx); len(p) > 0 {
		return fmt.Sprintf("EC2 shows prefix %s on it, which the release does not cover", p[0])
	}
	return ""
}

// ackedRelease returns the ID of the acknowledged release of an ENI among
// a node's releases, or "".
func ackedRelease(rels []store.Release, eniID string) string {
	for _, r := range rels {
		if r.ENIID == eniID && r.State == store.ReleaseAcked {
			return r.ID
		}
	}
	return ""
}

// deleteGivenUp deletes a detached ENI given up by release releaseID,
// behind a delete intent naming it; recording the delete drops the ENI's
// record and finishes the release together.
func (e *Engine) deleteGivenUp(ctx context.Context, rs *runState, eni store.ENI, releaseID string) error {
	in, err := e.begin(ctx, rs, store.Intent{
		Kind: store.IntentDelete, InstanceID: eni.InstanceID, ENIID: eni.ID, SubnetID: eni.SubnetID, ReleaseID: releaseID,
	})
	if err != nil {
		return err
	}
	defer rs.own(in.ID, false)
	err = e.ec2.DeleteENI(ctx, eni.ID)
	if err != nil && !ec2client.IsNotFound(err) {
		e.fail(ctx, in, err)
		return fmt.Errorf("delete ENI %s given up by release %s: %w", eni.ID, releaseID, err)
	}
	if err := e.st.CompleteGiveUp(ctx, in.ID, eni.ID); err != nil {
		return fmt.Errorf("record deleted ENI %s: %w", eni.ID, err)
	}
	e.undeliver(rs, eni.InstanceID, eni.ID)
	e.count(func(s *Stats) { s.Released += int64(podAddresses(eni)) })
	e.log.Info("release carried out: ENI deleted", "instance", eni.InstanceID, "release", releaseID, "eni", eni.ID,
		"addresses", podAddresses(eni))
	return nil
}
