package store

import (
	"context"
	"fmt"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"time"
)

// finishOp is the one transaction behind every Complete*: the intent goes
// open -> done, its reservation returns to its subnet, and effect applies
// the call's result to ENI records and Subnet.Attached, all or nothing.
// Completing a done intent is a no-op (the executor may retry after a lost
// reply); completing a failed one is rpcerr.ErrWrongState. eniID, if
// known, is read with the intent.
func finishOp(method, intentID, kind, eniID string, effect func(v *view, in *Intent, l *ledger) error) *Op {
	op := &Op{method: method}
	if op.err = checkID("intent", intentID); op.err != nil {
		return op
	}
	op.keys = func(s *Store) []string {
		if checkID("eni", eniID) != nil {
			return []string{s.key(kindIntents, intentID)}
		}
		return []string{s.key(kindIntents, intentID), s.key(kindENIs, eniID)}
	}
	op.decide = func(v *view) error {
		var in Intent
		ok, err := get(v, kindIntents, intentID, &in)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("intent %s: %w", intentID, rpcerr.ErrNotFound)
		}
		if in.Kind != kind {
			return fmt.Errorf("intent %s is a %s, not a %s: %w", intentID, in.Kind, kind, rpcerr.ErrInvalid)
		}
		switch in.State {
		case IntentDone:
			return nil
		case IntentFailed:
			return fmt.Errorf("intent %s already failed (%s): %w", intentID, in.Error, rpcerr.ErrWrongState)
		}
		l := newLedger(v)
		if err := l.unreserve(in.SubnetID, in.Reserved); err != nil {
			return err
		}
		if effect != nil {
			if err := effect(v, &in, l); err != nil {
				return err
			}
		}
		in.State, in.FinishedAt = IntentDone, time.Now().UTC()
		if err := l.flush(); err != nil {
			return err
		}
		return v.put(v.s.key(kindIntents, intentID), &in)
	}
	return op
}

// failed returns an op that is refused before it reads anything.
func failed(method string, err error) *Op { return &Op{method: method, err: err} }

// ownedENI loads the ENI an intent acts on. It must be the intent's ENI and
// belong to the intent's node; absent is rpcerr.ErrNotFound unless mayBeAbsent.
func ownedENI(v *view, in *Intent, eniID string, mayBeAbsent bool) (ENI, bool, error) {
	if err := checkID("eni", eniID); err != nil {
		return ENI{}, false, err
	}
	if in.ENIID != "" && in.ENIID != eniID {
		return ENI{}, false, fmt.Errorf("intent %s is for eni %s, not %s: %w", in.ID, in.ENIID, eniID, rpcerr.ErrInvalid)
	}
	var e ENI
	ok, err := get(v, kindENIs, eniID, &e)
	if err != nil {
		return ENI{}, false, err
	}
	if !ok {
		if mayBeAbsent {
			return ENI{}, false, nil
		}
		return ENI{}, false, fmt.Errorf("eni %s: %w", eniID, rpcerr.ErrNotFound)
	}
	if e.InstanceID != in.InstanceID {
		return ENI{}, false, fmt.Errorf("eni %s belongs to %s, not %s: %w", eniID, e.InstanceID, in.InstanceID, rpcerr.ErrNotOwner)
	}
	return e, true, nil
}

// putENI writes e and moves the difference in its weight into Attached.
func putENI(v *view, l *ledger, old ENI, had bool, e ENI) error {
	delta := e.Weight()
	if had {
		delta -= old.Weight()
		if old.SubnetID != e.SubnetID {
			return fmt.Errorf("eni %s: subnet %s cannot change to %s: %w", e.ID, old.SubnetID, e.SubnetID, rpcerr.ErrInvalid)
		}
	}
	if err := l.attach(e.SubnetID, delta); err != nil {
		return err
	}
	return v.put(v.s.key(kindENIs, e.ID), &e)
}

// CompleteCreate records the ENI CreateNetworkInterface made (status
// created) and adds its addresses (primary, secondaries, 16 per prefix) to
// the subnet's Attached. InstanceID and SubnetID default to the intent's.
func (s *Store) CompleteCreate(ctx context.Context, intentID string, eni ENI) error {
	return s.apply(ctx, CompleteCreateOp(intentID, eni))
}

// CompleteCreateOp is CompleteCreate as an op (Apply).
func CompleteCreateOp(intentID string, eni ENI) *Op {
	if err := checkID("eni", eni.ID); err != nil {
		return failed("CompleteCreate", err)
	}
	if err := checkAddrs("eni "+eni.ID, eni.Addresses, eni.Prefixes); err != nil {
		return failed("CompleteCreate", err)
	}
	return finishOp("CompleteCreate", intentID, IntentCreate, eni.ID, func(v *view, in *Intent, l *ledger) error {
		e := eni
		e.InstanceID = cmpOr(e.InstanceID, in.InstanceID)
		e.SubnetID = cmpOr(e.SubnetID, in.SubnetID)
		e.ClientToken = cmpOr(e.ClientToken, in.ClientToken)
		switch {
		case e.InstanceID != in.InstanceID:
			return fmt.Errorf("create intent %s is for %s, not %s: %w", in.ID, in.InstanceID, e.InstanceID, rpcerr.ErrNotOwner)
		case in.SubnetID != "" && e.SubnetID != in.SubnetID:
			return fmt.Errorf("create intent %s is for subnet %s, not %s: %w", in.ID, in.SubnetID, e.SubnetID, rpcerr.ErrInvalid)
		case in.ENIID != "" && in.ENIID != e.ID:
			return fmt.Errorf("create intent %s is for eni %s, not %s: %w", in.ID, in.ENIID, e.ID, rpcerr.ErrInvalid)
		}
		if err := checkID("subnet of eni "+e.ID, e.SubnetID); err != nil {
			return err
		}
		var old ENI
		had, err := get(v, kindENIs, e.ID, &old)
		if err != nil {
			return err
		}
		if had && old.InstanceID != e.InstanceID {
			return fmt.Errorf("eni %s belongs to %s, not %s: %w", e.ID, old.InstanceID, e.InstanceID, rpcerr.ErrNotOwner)
		}
		e.Primary, e.Status = false, ENICreated
		if had && old.Status == ENIAttached {
			// Recorded attached already (e.g. by a reconciler pass); keep it.
			e.Status, e.DeviceIndex = old.Status, old.DeviceIndex
		}
		if e.CreatedAt.IsZero() {
			e.CreatedAt = time.Now().UTC()
		}
		e.Addresses, e.Prefixes = union(nil, e.Addresses), union(nil, e.Prefixes)
		in.ENIID = e.ID
		return putENI(v, l, old, had, e)
	})
}

// CompleteAttach marks the ENI attached at deviceIndex.
func (s *Store) CompleteAttach(ctx context.Context, intentID, eniID string, deviceIndex int) error {
	return s.apply(ctx, CompleteAttachOp(intentID, eniID, deviceIndex))
}

// CompleteAttachOp is CompleteAttach as an op (Apply).
func CompleteAttachOp(intentID, eniID string, deviceIndex int) *Op {
	if deviceIndex < 0 {
		return failed("CompleteAttach", fmt.Errorf("attach of eni %s: device index %d: %w", eniID, deviceIndex, rpcerr.ErrInvalid))
	}
	return finishOp("CompleteAttach", intentID, IntentAttach, eniID, func(v *view, in *Intent, l *ledger) error {
		e, _, err := ownedENI(v, in, eniID, false)
		if err != nil {
			return err
		}
		e.Status, e.DeviceIndex = ENIAttached, deviceIndex
		in.DeviceIndex = deviceIndex
		return v.put(v.s.key(kindENIs, eniID), &e)
	})
}

// CompleteModify closes a ModifyNetworkInterfaceAttribute intent.
func (s *Store) CompleteModify(ctx context.Context, intentID string) error {
	return s.apply(ctx, finishOp("CompleteModify", intentID, IntentModify, "", nil))
}

// CompleteAssign adds the assigned addresses and prefixes to the ENI record
// and to the subnet's Attached.
func (s *Store) CompleteAssign(ctx context.Context, intentID, eniID string, addrs, prefixes []string) error {
	return s.apply(ctx, CompleteAssignOp(intentID, eniID, addrs, prefixes))
}

// CompleteAssignOp is CompleteAssign as an op (Apply).
func CompleteAssignOp(intentID, eniID string, addrs, prefixes []string) *Op {
	if err := checkAddrs("assign to eni "+eniID, addrs, prefixes); err != nil {
		return failed("CompleteAssign", err)
	}
	return finishOp("CompleteAssign", intentID, IntentAssign, eniID, func(v *view, in *Intent, l *ledger) error {
		old, _, err := ownedENI(v, in, eniID, false)
		if err != nil {
			return err
		}
		e := old
		e.Addresses, e.Prefixes = union(old.Addresses, addrs), union(old.Prefixes, prefixes)
		return putENI(v, l, old, true, e)
	})
}

// CompleteUnassign removes addresses and prefixes from the ENI record and
// from the subnet's Attached, and marks the intent's release done. Only
// what the intent named (and so the agent acknowledged) may be removed;
// empty lists mean all of it.
func (s *Store) CompleteUnassign(ctx context.Context, intentID, eniID string, addrs, prefixes []string) error {
	return s.apply(ctx, CompleteUnassignOp(intentID, eniID, addrs, prefixes))
}

// CompleteUnassignOp is CompleteUnassign as an op (Apply).
func CompleteUnassignOp(intentID, eniID string, addrs, prefixes []string) *Op {
	return finishOp("CompleteUnassign", intentID, IntentUnassign, eniID, func(v *view, in *Intent, l *ledger) error {
		if len(addrs)+len(prefixes) == 0 {
			addrs, prefixes = in.Addresses, in.Prefixes
		}
		if a := missingFrom(addrs, in.Addresses); a != "" {
			return fmt.Errorf("unassign intent %s does not name address %s: %w", in.ID, a, rpcerr.ErrInvalid)
		}
		if p := missingFrom(prefixes, in.Prefixes); p != "" {
			return fmt.Errorf("unassign intent %s does not name prefix %s: %w", in.ID, p, rpcerr.ErrInvalid)
		}
		old, _, err := ownedENI(v, in, eniID, false)
		if err != nil {
			return err
		}
		e := old
		e.Addresses, e.Prefixes = minus(old.Addresses, addrs), minus(old.Prefixes, prefixes)
		if err := putENI(v, l, old, true, e); err != nil {
			return err
		}
		var r Release
		ok, err := get(v, kindReleases, in.ReleaseID, &r)
		if err != nil || !ok || r.State != ReleaseAcked {
			return err
		}
		r.State = ReleaseDone
		return v.put(v.s.key(kindReleases, r.ID), &r)
	})
}

// CompleteDetach marks the ENI detached. An ENI without a record (a leak
// being collected) only closes the intent.
func (s *Store) CompleteDetach(ctx context.Context, intentID, eniID string) error {
	return s.apply(ctx, CompleteDetachOp(intentID, eniID))
}

// CompleteDetachOp is CompleteDetach as an op (Apply).
func CompleteDetachOp(intentID, eniID string) *Op {
	return finishOp("CompleteDetach", intentID, IntentDetach, eniID, func(v *view, in *Intent, l *ledger) error {
		e, ok, err := ownedENI(v, in, eniID, true)
		if err != nil || !ok {
			return err
		}
		e.Status = ENIDetached
		return v.put(v.s.key(kindENIs, eniID), &e)
	})
}

// CompleteDelete removes the ENI record and subtracts its addresses from the
// subnet's Attached. An ENI without a record only closes the intent.
func (s *Store) CompleteDelete(ctx context.Context, intentID, eniID string) error {
	return s.apply(ctx, CompleteDeleteOp(intentID, eniID))
}

// CompleteDeleteOp is CompleteDelete as an op (Apply).
func CompleteDeleteOp(intentID, eniID string) *Op {
	return finishOp("CompleteDelete", intentID, IntentDelete, eniID, func(v *view, in *Intent, l *ledger) error {
		e, ok, err := ownedENI(v, in, eniID, true)
		if err != nil || !ok {
			return err
		}
		if err := l.attach(e.SubnetID, -e.Weight()); err != nil {
			return err
		}
		v.del(v.s.key(kindENIs, eniID))
		return nil
	})
}

// FailIntent records that the call failed (EC2 refused it, or it is known
// not to have happened) and returns the reservation. Failing a failed
// intent is a no-op; failing a done one is rpcerr.ErrWrongState.
func (s *Store) FailIntent(ctx context.Context, intentID string, cause error) error {
	return s.apply(ctx, FailOp(intentID, cause))
}

// FailOp is FailIntent as an op (Apply).
func FailOp(intentID string, cause error) *Op {
	op := &Op{method: "FailIntent"}
	if op.err = checkID("intent", intentID); op.err != nil {
		return op
	}
	msg := "unknown cause"
	if cause != nil {
		msg = cause.Error()
	}
	op.keys = func(s *Store) []string { return []string{s.key(kindIntents, intentID)} }
	op.decide = func(v *view) error {
		var in Intent
		ok, err := get(v, kindIntents, intentID, &in)
		if err != nil {
			return err
		}
		switch {
		case !ok:
			return fmt.Errorf("intent %s: %w", intentID, rpcerr.ErrNotFound)
		case in.State == IntentFailed:
			return nil
		case in.State == IntentDone:
			return fmt.Errorf("intent %s is already done: %w", intentID, rpcerr.ErrWrongState)
		}
		l := newLedger(v)
		if err := l.unreserve(in.SubnetID, in.Reserved); err != nil {
			return err
		}
		if err := l.flush(); err != nil {
			return err
		}
		in.State, in.Error, in.FinishedAt = IntentFailed, msg, time.Now().UTC()
		return v.put(v.s.key(kindIntents, intentID), &in)
	}
	return op
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
