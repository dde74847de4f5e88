package store

import (
	"context"
	"fmt"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// An ENI given up whole goes back to EC2 by DetachNetworkInterface and
// DeleteNetworkInterface alone: deleting it frees every address on it, so
// no UnassignPrivateIpAddresses is needed. Its detach and delete intents
// name the release (ReleaseID) that covers it. The release stays
// acknowledged, and its addresses stay on the ENI's record, until the
// delete is recorded (CompleteGiveUp): the record then drops the ENI, its
// addresses and the release's open state in one transaction, so the agent,
// which keeps a release's addresses set aside while the broker lists them,
// never sees them listed without the release that holds them.

// checkGiveUp checks the detach or delete intent of an ENI given up whole
// against the records: the ENI is recorded, belongs to the intent's node
// and is not a primary ENI; the release is the same node's, for the same
// ENI, acknowledged; and every address and prefix the record lists on the
// ENI is among those the agent acknowledged. An address the release does
// not cover keeps the ENI: nothing is freed without the owner's consent.
func checkGiveUp(v *view, in *Intent, e ENI, recorded bool) error {
	switch {
	case !recorded:
		return fmt.Errorf("%s intent: eni %s given up by release %s: %w", in.Kind, in.ENIID, in.ReleaseID, rpcerr.ErrNotFound)
	case e.Primary:
		return fmt.Errorf("%s intent: eni %s is the primary ENI of %s and is never given up: %w", in.Kind, e.ID, e.InstanceID, rpcerr.ErrInvalid)
	}
	var r Release
	ok, err := get(v, kindReleases, in.ReleaseID, &r)
	if err != nil {
		return err
	}
	switch {
	case !ok:
		return fmt.Errorf("%s intent: release %s: %w", in.Kind, in.ReleaseID, rpcerr.ErrNotFound)
	case r.InstanceID != in.InstanceID:
		return fmt.Errorf("%s intent: release %s belongs to %s, not %s: %w", in.Kind, r.ID, r.InstanceID, in.InstanceID, rpcerr.ErrNotOwner)
	case r.ENIID != in.ENIID:
		return fmt.Errorf("%s intent: release %s is for eni %s, not %s: %w", in.Kind, r.ID, r.ENIID, in.ENIID, rpcerr.ErrInvalid)
	case r.State != ReleaseAcked:
		return fmt.Errorf("%s intent: release %s is %s, not acknowledged: %w", in.Kind, r.ID, r.State, rpcerr.ErrWrongState)
	}
	if a := missingFrom(e.Addresses, r.AckedAddrs); a != "" {
		return fmt.Errorf("%s intent: address %s of eni %s was not acknowledged free in release %s: %w", in.Kind, a, e.ID, r.ID, rpcerr.ErrInvalid)
	}
	if p := missingFrom(e.Prefixes, r.AckedPfx); p != "" {
		return fmt.Errorf("%s intent: prefix %s of eni %s was not acknowledged free in release %s: %w", in.Kind, p, e.ID, r.ID, rpcerr.ErrInvalid)
	}
	return nil
}

// CompleteGiveUp records the delete of an ENI given up whole: the delete
// intent is done, the ENI's record goes and its addresses leave the
// subnet's Attached, and the release the intent names is done, all in one
// transaction. An ENI without a record (a repeated completion after a lost
// reply, or EC2 no longer knowing it) only closes the intent and the
// release.
func (s *Store) CompleteGiveUp(ctx context.Context, intentID, eniID string) error {
	return s.apply(ctx, CompleteGiveUpOp(intentID, eniID))
}

// CompleteGiveUpOp is CompleteGiveUp as an op (Apply).
func CompleteGiveUpOp(intentID, eniID string) *Op {
	return finishOp("CompleteGiveUp", intentID, IntentDelete, eniID, func(v *view, in *Intent, l *ledger) error {
		if in.ReleaseID == "" {
			return fmt.Errorf("delete intent %s names no release: %w", in.ID, rpcerr.ErrInvalid)
		}
		e, ok, err := ownedENI(v, in, eniID, true)
		if err != nil {
			return err
		}
		if ok {
			if err := l.attach(e.SubnetID, -e.Weight()); err != nil {
				return err
			}
			v.del(v.s.key(kindENIs, eniID))
		}
		var r Release
		found, err := get(v, kindReleases, in.ReleaseID, &r)
		if err != nil || !found || r.State != ReleaseAcked {
			return err
		}
		r.State = ReleaseDone
		return v.put(v.s.key(kindReleases, r.ID), &r)
	})
}
