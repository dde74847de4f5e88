package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// errWait means a task found EC2 not yet ready (an ENI still detaching);
// the node is retried after the backoff without counting a failure.
var errWait = errors.New("waiting for EC2")

// createAttach carries out a CreateAttach action: Create (pre-filled,
// tagged, ClientToken = intent ID), Attach at the planned device index, and
// DeleteOnTermination, each behind its own intent. later's funcs are called
// as the Attach and the Modify are about to ask for their tokens.
func (e *Engine) createAttach(ctx context.Context, rs *runState, a planner.Action, n store.Node, begun func(), later chained) error {
	id := NewIntentID(ExecutorIntentPrefix)
	in, err := e.begin(ctx, rs, store.Intent{
		ID: id, Kind: store.IntentCreate, InstanceID: a.InstanceID, SubnetID: a.SubnetID,
		ClientToken: id, DeviceIndex: a.DeviceIndex, Count: a.Count, Prefix: a.Mode == planner.Prefix,
		SecurityGroups: a.SecurityGroups, Reserved: a.Cost(), Urgent: a.Urgent,
	})
	begun()
	if err != nil {
		return err
	}
	defer rs.own(in.ID, false)
	input := e.createInput(in, n.SecurityGroups)
	info, err := e.ec2.CreateENI(ctx, input)
	if err != nil {
		e.fail(ctx, in, err)
		e.noteNoPrefix(ctx, a.SubnetID, in.Prefix, err)
		return fmt.Errorf("create ENI for %s in %s: %w", a.InstanceID, a.SubnetID, err)
	}
	now := e.cfg.Clock.Now()
	rec := eniRecord(info, a.InstanceID, a.DeviceIndex, id, now)
	if err := e.st.CompleteCreate(ctx, in.ID, rec); err != nil {
		return fmt.Errorf("record created ENI %s: %w", info.ID, err)
	}
	e.deliver(rs, a.InstanceID, rec.ID, podAddresses(rec), now)
	return e.attach(ctx, rs, rec, later)
}

// createInput is the CreateNetworkInterface request of a create intent.
// It is a function of the intent alone (and, for an intent that names no
// security groups, the node's), so a new leader can send the very same
// request again: EC2 answers a repeated ClientToken with the ENI the first
// request made.
func (e *Engine) createInput(in store.Intent, nodeGroups []string) ec2client.CreateENIInput {
	sgs := in.SecurityGroups
	if len(sgs) == 0 {
		sgs = nodeGroups
	}
	token := in.ClientToken
	if token == "" {
		token = in.ID
	}
	input := ec2client.CreateENIInput{
		SubnetID:       in.SubnetID,
		SecurityGroups: sgs,
		Description:    fmt.Sprintf("allot %s %s", e.cfg.Cluster, in.InstanceID),
		Tags:           e.tags(in.InstanceID, token, in.CreatedAt),
		ClientToken:    token,
	}
	if in.Prefix {
		input.PrefixCount = in.Count
	} else {
		input.SecondaryCount = in.Count
	}
	return input
}

// attach attaches a created ENI at its recorded device index and then sets
// DeleteOnTermination. When EC2 refuses the attach (the index is taken, the
// instance is full), the ENI is deleted so it neither leaks nor holds
// budget; the demand is planned afresh. When EC2 failed on its side
// (InternalError, Unavailable) or the call got no answer, the ENI is kept:
// it stays recorded as created, and the next round's upkeep describes it
// (the attach may have happened after all) and attaches this same ENI
// again. A new ENI would cost a Create and a Delete for nothing. later's
// funcs, where set, are called as the Attach and the Modify are about to
// ask for their tokens.
func (e *Engine) attach(ctx context.Context, rs *runState, eni store.ENI, later chained) error {
	in, err := e.begin(ctx, rs, store.Intent{
		Kind: store.IntentAttach, InstanceID: eni.InstanceID, ENIID: eni.ID, SubnetID: eni.SubnetID,
		DeviceIndex: eni.DeviceIndex,
	})
	later.attachAsks()
	if err != nil {
		return err
	}
	defer rs.own(in.ID, false)
	attachmentID, err := e.ec2.AttachENI(ctx, eni.ID, eni.InstanceID, eni.DeviceIndex)
	if err != nil {
		e.fail(ctx, in, err)
		if apiRefused(err) && !ec2client.IsServerError(err) {
			if derr := e.deleteENI(ctx, rs, eni); derr != nil {
				err = errors.Join(err, derr)
			}
		}
		return fmt.Errorf("attach ENI %s to %s at index %d: %w", eni.ID, eni.InstanceID, eni.DeviceIndex, err)
	}
	if err := e.st.CompleteAttach(ctx, in.ID, eni.ID, eni.DeviceIndex); err != nil {
		return fmt.Errorf("record attached ENI %s: %w", eni.ID, err)
	}
	return e.modify(ctx, rs, eni, attachmentID, later)
}

// modify sets DeleteOnTermination so EC2 removes the ENI with its instance.
// A failure is logged, not fatal: the ENI works, and the reconciler deletes
// what a terminated instance leaves behind.
func (e *Engine) modify(ctx context.Context, rs *runState, eni store.ENI, attachmentID string, later chained) error {
	in, err := e.begin(ctx, rs, store.Intent{
		Kind: store.IntentModify, InstanceID: eni.InstanceID, ENIID: eni.ID, SubnetID: eni.SubnetID,
	})
	later.modifyAsks()
	if err != nil {
		return err
	}
	defer rs.own(in.ID, false)
	err = e.ec2.SetDeleteOnTermination(ctx, eni.ID, attachmentID, true)
	if err != nil {
		e.fail(ctx, in, err)
		e.log.Warn("setting DeleteOnTermination", "eni", eni.ID, "instance", eni.InstanceID, "err", err)
		return nil
	}
	if err := e.st.CompleteModify(ctx, in.ID); err != nil {
		return fmt.Errorf("record DeleteOnTermination of %s: %w", eni.ID, err)
	}
	return nil
}

// resumeAttach finishes an ENI recorded as created but not attached (a
// crash or a failure between Create and Attach). It describes first: the
// attach may have happened after all. Describe not showing the ENI proves
// nothing (EC2 shows new ENIs late); the attach then decides, and if EC2
// refuses it the ENI is deleted.
func (e *Engine) resumeAttach(ctx context.Context, rs *runState, eni store.ENI) error {
	x, found, err := e.describeOne(ctx, eni.ID)
	if err != nil {
		return err
	}
	switch {
	case !found:
	case x.AttachmentID != "" && x.InstanceID == eni.InstanceID:
		in, err := e.begin(ctx, rs, store.Intent{
			Kind: store.IntentAttach, InstanceID: eni.InstanceID, ENIID: eni.ID, SubnetID: eni.SubnetID,
			DeviceIndex: x.DeviceIndex,
		})
		if err != nil {
			return err
		}
		defer rs.own(in.ID, false)
		if err := e.st.CompleteAttach(ctx, in.ID, eni.ID, x.DeviceIndex); err != nil {
			return fmt.Errorf("record attached ENI %s: %w", eni.ID, err)
		}
		if x.DeleteOnTermination {
			return nil
		}
		return e.modify(ctx, rs, eni, x.AttachmentID, chained{})
	case x.AttachmentID != "":
		return fmt.Errorf("ENI %s, recorded for %s, is attached to %q: left for the operator", eni.ID, eni.InstanceID, x.InstanceID)
	}
	return e.attach(ctx, rs, eni, chained{})
}

// deleteENI deletes an ENI that is not attached, behind a delete intent.
func (e *Engine) deleteENI(ctx context.Context, rs *runState, eni store.ENI) error {
	in, err := e.begin(ctx, rs, store.Intent{
		Kind: store.IntentDelete, InstanceID: eni.InstanceID, ENIID: eni.ID, SubnetID: eni.SubnetID,
	})
	if err != nil {
		return err
	}
	defer rs.own(in.ID, false)
	err = e.ec2.DeleteENI(ctx, eni.ID)
	if err != nil && !ec2client.IsNotFound(err) {
		e.fail(ctx, in, err)
		return fmt.Errorf("delete ENI %s: %w", eni.ID, err)
	}
	if err := e.st.CompleteDelete(ctx, in.ID, eni.ID); err != nil {
		return fmt.Errorf("record deleted ENI %s: %w", eni.ID, err)
	}
	e.undeliver(rs, eni.InstanceID, eni.ID)
	return nil
}

// forget removes the record of an ENI that EC2 says does not exist, behind
// a delete intent that never reaches EC2, so the removal is on record. An
// ENI given up by release releaseID ("" for none) finishes that release in
// the same transaction (store.CompleteGiveUp).
func (e *Engine) forget(ctx context.Context, rs *runState, eni store.ENI, releaseID, why string) error {
	in, err := e.begin(ctx, rs, store.Intent{
		Kind: store.IntentDelete, InstanceID: eni.InstanceID, ENIID: eni.ID, SubnetID: eni.SubnetID, ReleaseID: releaseID,
	})
	if err != nil {
		return err
	}
	defer rs.own(in.ID, false)
	complete := e.st.CompleteDelete
	if releaseID != "" {
		complete = e.st.CompleteGiveUp
	}
	if err := complete(ctx, in.ID, eni.ID); err != nil {
		return fmt.Errorf("remove record of vanished ENI %s: %w", eni.ID, err)
	}
	e.undeliver(rs, eni.InstanceID, eni.ID)
	e.log.Warn("removed ENI record", "eni", eni.ID, "instance", eni.InstanceID, "release", releaseID, "reason", why)
	return nil
}

// deleteDetached deletes an ENI recorded as detached once EC2 reports it
// available (a detach takes a while). An ENI given up by release releaseID
// ("" for none) is deleted only if EC2 still shows it as one the release
// may free (cannotGiveUp), and recording the delete finishes the release.
func (e *Engine) deleteDetached(ctx context.Context, rs *runState, eni store.ENI, releaseID string) error {
	x, found, err := e.describeOne(ctx, eni.ID)
	if err != nil {
		return err
	}
	switch {
	case !found && releaseID != "":
		return e.forget(ctx, rs, eni, releaseID, "ENI given up by a release no longer exists in EC2")
	case !found:
		return e.forget(ctx, rs, eni, "", "detached ENI no longer exists in EC2")
	case x.Status != "available" || x.AttachmentID != "":
		return errWait
	case releaseID == "":
		return e.deleteENI(ctx, rs, eni)
	}
	if why := e.cannotGiveUp(x, eni, store.Release{ID: releaseID, AckedAddrs: eni.Addresses, AckedPfx: eni.Prefixes}); why != "" {
		return fmt.Errorf("detached ENI %s of release %s not deleted: %s", eni.ID, releaseID, why)
	}
	return e.deleteGivenUp(ctx, rs, eni, releaseID)
}

// assign carries out an Assign action: one AssignPrivateIpAddresses.
func (e *Engine) assign(ctx context.Context, rs *runState, a planner.Action, eni store.ENI, begun func()) error {
	now := e.cfg.Clock.Now()
	prefix := a.Mode == planner.Prefix
	in, err := e.begin(ctx, rs, store.Intent{
		Kind: store.IntentAssign, InstanceID: a.InstanceID, ENIID: a.ENIID, SubnetID: a.SubnetID,
		Count: a.Count, Prefix: prefix, Reserved: a.Cost(), Urgent: a.Urgent,
	})
	begun()
	if err != nil {
		return err
	}
	defer rs.own(in.ID, false)
	added, err := e.ec2.AssignAddresses(ctx, a.ENIID, a.Count, prefix)
	if err != nil {
		e.fail(ctx, in, err)
		e.noteNoPrefix(ctx, a.SubnetID, prefix, err)
		return fmt.Errorf("assign %d to ENI %s of %s: %w", a.Count, a.ENIID, a.InstanceID, err)
	}
	var addrs, prefixes []string
	if prefix {
		prefixes = added
	} else {
		addrs = added
	}
	if err := e.st.CompleteAssign(ctx, in.ID, a.ENIID, addrs, prefixes); err != nil {
		return fmt.Errorf("record addresses assigned to %s: %w", a.ENIID, err)
	}
	e.deliver(rs, a.InstanceID, in.ID, allotv1.PodAddresses(len(addrs), len(prefixes)), now)
	return nil
}
