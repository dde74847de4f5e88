package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// newID returns a random id with a readable prefix.
func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return prefix + hex.EncodeToString(b[:])
}

// kindNeedsENI says which intent kinds act on an existing ENI, and whether
// its record must exist: detach and delete may target an ENI the broker
// has no record of (a leak found by the reconciler).
var kindNeedsENI = map[string]struct{ eni, record bool }{
	IntentCreate:   {},
	IntentAttach:   {eni: true, record: true},
	IntentModify:   {eni: true, record: true},
	IntentAssign:   {eni: true, record: true},
	IntentUnassign: {eni: true, record: true},
	IntentDetach:   {eni: true},
	IntentDelete:   {eni: true},
}

// BeginIntent records a mutating EC2 call before it is sent, state open. In
// the same transaction it reserves in.Reserved addresses from in.SubnetID:
// a *rpcerr.BudgetError if the subnet's Available() is smaller, and then nothing
// is written. It fills ID (if empty), State and CreatedAt.
//
// An ENI the intent names must belong to in.InstanceID (rpcerr.ErrNotOwner). An
// unassign must name an acknowledged release of the same node and ENI
// (ReleaseID), and may only take back addresses the agent acknowledged:
// nothing is unassigned without a positive, recorded release. A detach or
// delete that names a release gives the ENI up whole, which frees every
// address on it: the release must cover them all (checkGiveUp).
//
// Beginning an intent whose ID already exists returns the stored one if it
// describes the same call (a retried request), rpcerr.ErrInvalid otherwise.
func (s *Store) BeginIntent(ctx context.Context, in Intent) (Intent, error) {
	op := BeginOp(in)
	err := s.apply(ctx, op)
	return op.Intent(), err
}

// BeginOp is BeginIntent as an op, to commit with others (Apply).
func BeginOp(in Intent) *Op {
	op := &Op{method: "BeginIntent"}
	if op.err = checkIntent(&in); op.err != nil {
		return op
	}
	if in.ID == "" {
		in.ID = newID("int-")
	}
	in.State, in.Error, in.FinishedAt = IntentOpen, "", time.Time{}
	in.CreatedAt = time.Now().UTC()
	op.keys = func(s *Store) []string {
		keys := []string{s.key(kindIntents, in.ID)}
		if in.ENIID != "" {
			keys = append(keys, s.key(kindENIs, in.ENIID))
		}
		if in.ReleaseID != "" {
			keys = append(keys, s.key(kindReleases, in.ReleaseID))
		}
		if in.Reserved > 0 {
			keys = append(keys, s.key(kindSubnets, in.SubnetID))
		}
		return keys
	}
	// fresh: the intent's record is written by this transaction (so its
	// revision is the one the transaction commits at).
	fresh := false
	op.decide = func(v *view) error {
		var err error
		op.intent, fresh, err = beginIntent(v, in)
		return err
	}
	op.done = func(rev int64) {
		if fresh {
			op.intent.Rev = rev
		}
	}
	return op
}

// beginIntent decides BeginIntent on v: the intent to return and whether
// its record is written by this transaction.
func beginIntent(v *view, in Intent) (Intent, bool, error) {
	var cur Intent
	ok, err := get(v, kindIntents, in.ID, &cur)
	if err != nil {
		return Intent{}, false, err
	}
	if ok {
		if cur.Kind != in.Kind || cur.InstanceID != in.InstanceID || cur.ENIID != in.ENIID ||
			cur.SubnetID != in.SubnetID || cur.Reserved != in.Reserved || cur.ReleaseID != in.ReleaseID {
			return Intent{}, false, fmt.Errorf("intent %s already exists for another call: %w", in.ID, rpcerr.ErrInvalid)
		}
		// Rev 0: begun earlier in the same transaction.
		return cur, cur.Rev == 0, nil
	}
	if err := v.s.checkIntentTargets(v, &in); err != nil {
		return Intent{}, false, err
	}
	if in.Reserved > 0 {
		l := newLedger(v)
		sn, err := l.subnet(in.SubnetID)
		if err != nil {
			return Intent{}, false, err
		}
		if sn.Available() < in.Reserved {
			return Intent{}, false, &rpcerr.BudgetError{SubnetID: sn.ID, Limit: sn.Limit(), Use: sn.Attached + sn.Reserved, Requested: in.Reserved}
		}
		sn.Reserved += in.Reserved
		if err := l.flush(); err != nil {
			return Intent{}, false, err
		}
	}
	return in, true, v.put(v.s.key(kindIntents, in.ID), &in)
}

// checkIntent validates an intent's fields on their own.
func checkIntent(in *Intent) error {
	need, ok := kindNeedsENI[in.Kind]
	if !ok {
		return fmt.Errorf("intent kind %q unknown: %w", in.Kind, rpcerr.ErrInvalid)
	}
	if in.ID != "" {
		if err := checkID("intent", in.ID); err != nil {
			return err
		}
	}
	if err := checkID(in.Kind+" intent: node", in.InstanceID); err != nil {
		return err
	}
	if need.eni {
		if err := checkID(in.Kind+" intent: eni", in.ENIID); err != nil {
			return err
		}
	}
	if in.Reserved < 0 || in.Count < 0 || in.DeviceIndex < 0 {
		return fmt.Errorf("%s intent: reserved %d, count %d and device index %d must not be negative: %w", in.Kind, in.Reserved, in.Count, in.DeviceIndex, rpcerr.ErrInvalid)
	}
	if in.Reserved > 0 || in.SubnetID != "" {
		if err := checkID(in.Kind+" intent: subnet", in.SubnetID); err != nil {
			return err
		}
	}
	if err := checkAddrs(in.Kind+" intent", in.Addresses, in.Prefixes); err != nil {
		return err
	}
	if in.ReleaseID != "" {
		if in.Kind != IntentUnassign && in.Kind != IntentDetach && in.Kind != IntentDelete {
			return fmt.Errorf("%s intent: only an unassign, detach or delete carries out a release: %w", in.Kind, rpcerr.ErrInvalid)
		}
		if err := checkID(in.Kind+" intent: release", in.ReleaseID); err != nil {
			return err
		}
	}
	if in.Kind == IntentUnassign {
		if err := checkID("unassign intent: release", in.ReleaseID); err != nil {
			return err
		}
		if len(in.Addresses)+len(in.Prefixes) == 0 {
			return fmt.Errorf("unassign intent: no addresses or prefixes: %w", rpcerr.ErrInvalid)
		}
	}
	return nil
}

// checkIntentTargets checks the ENI and release an intent names against
// their records.
func (s *Store) checkIntentTargets(v *view, in *Intent) error {
	need := kindNeedsENI[in.Kind]
	if !need.eni {
		return nil
	}
	var e ENI
	ok, err := get(v, kindENIs, in.ENIID, &e)
	if err != nil {
		return err
	}
	if !ok && need.record {
		return fmt.Errorf("%s intent: eni %s: %w", in.Kind, in.ENIID, rpcerr.ErrNotFound)
	}
	if ok && e.InstanceID != in.InstanceID {
		return fmt.Errorf("%s intent: eni %s belongs to %s, not %s: %w", in.Kind, in.ENIID, e.InstanceID, in.InstanceID, rpcerr.ErrNotOwner)
	}
	if (in.Kind == IntentDetach || in.Kind == IntentDelete) && in.ReleaseID != "" {
		return checkGiveUp(v, in, e, ok)
	}
	if in.Kind != IntentUnassign {
		return nil
	}
	var r Release
	ok, err = get(v, kindReleases, in.ReleaseID, &r)
	if err != nil {
		return err
	}
	switch {
	case !ok:
		return fmt.Errorf("unassign intent: release %s: %w", in.ReleaseID, rpcerr.ErrNotFound)
	case r.InstanceID != in.InstanceID:
		return fmt.Errorf("unassign intent: release %s belongs to %s, not %s: %w", r.ID, r.InstanceID, in.InstanceID, rpcerr.ErrNotOwner)
	case r.ENIID != in.ENIID:
		return fmt.Errorf("unassign intent: release %s is for eni %s, not %s: %w", r.ID, r.ENIID, in.ENIID, rpcerr.ErrInvalid)
	case r.State != ReleaseAcked:
		return fmt.Errorf("unassign intent: release %s is %s, not acknowledged: %w", r.ID, r.State, rpcerr.ErrWrongState)
	}
	if a := missingFrom(in.Addresses, r.AckedAddrs); a != "" {
		return fmt.Errorf("unassign intent: address %s was not acknowledged free in release %s: %w", a, r.ID, rpcerr.ErrInvalid)
	}
	if p := missingFrom(in.Prefixes, r.AckedPfx); p != "" {
		return fmt.Errorf("unassign intent: prefix %s was not acknowledged free in release %s: %w", p, r.ID, rpcerr.ErrInvalid)
	}
	return nil
}

// GetIntent returns one intent.
func (s *Store) GetIntent(ctx context.Context, id string) (Intent, error) {
	return getOne[*Intent](ctx, s, kindIntents, "intent", id)
}

// ListIntents returns every intent, oldest first.
func (s *Store) ListIntents(ctx context.Context) ([]Intent, error) {
	out, err := listAll[*Intent](ctx, s, kindIntents)
	slices.SortFunc(out, IntentOrder)
	return out, err
}

// ListOpenIntents returns the intents still open, oldest first: the calls a
// new leader must resolve.
func (s *Store) ListOpenIntents(ctx context.Context) ([]Intent, error) {
	open, _, err := s.openIntents(ctx, 0)
	return open, err
}

// intentPage is how many intents one read of openIntents asks etcd for
// (a variable for the tests).
var intentPage int64 = 1000

// openIntents reads the open intents as of revision rev (0: the latest),
// a page at a time, and returns them oldest first with the revision read.
//
// etcd keeps finished intents until they are pruned: tens of thousands in
// a burst at 5,000 nodes. Read in one range, every one of them was held
// at once three times over (gRPC's buffers, the decoded response, the
// records), 100 MiB and more of the broker's heap for a moment, which set
// the collector's goal and the broker's peak memory. A page at a time,
// only the open ones stay.
func (s *Store) openIntents(ctx context.Context, rev int64) ([]Intent, int64, error) {
	dir := s.dir(kindIntents)
	end := clientv3.GetPrefixRangeEnd(dir)
	var open []Intent
	for from := dir; ; {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(intentPage)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, 0, fmt.Errorf("etcd read: %w", err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			key := string(kv.Key)
			var in Intent
			if err := decode(key, kv.Value, kv.ModRevision, strings.TrimPrefix(key, dir), &in); err != nil {
				return nil, 0, err
			}
			if in.State == IntentOpen {
				open = append(open, in)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	slices.SortFunc(open, IntentOrder)
	return open, rev, nil
}

// openOldestFirst keeps the open intents of all, oldest first (then by ID).
func openOldestFirst(all []Intent) []Intent {
	open := slices.DeleteFunc(all, func(in Intent) bool { return in.State != IntentOpen })
	slices.SortFunc(open, IntentOrder)
	return open
}

// IntentOrder is the order intents are listed in: oldest first, then by ID.
func IntentOrder(a, b Intent) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
}

// pruneBatch bounds the deletes per transaction (etcd allows 128 ops).
const pruneBatch = 50

// PruneIntents deletes done and failed intents that finished before
// olderThan, and returns how many it deleted. Open intents are never
// pruned. An intent changed since it was read is left for the next prune.
// It reads every intent; a reader that follows them (FollowIntents) knows
// the finished ones and deletes them with DeleteIntents instead.
func (s *Store) PruneIntents(ctx context.Context, olderThan time.Time) (int, error) {
	all, err := s.ListIntents(ctx)
	if err != nil {
		return 0, err
	}
	var old []Intent
	for _, in := range all {
		if Prunable(in, olderThan) {
			old = append(old, in)
		}
	}
	return s.DeleteIntents(ctx, old)
}

// Pruning is the part of a finished intent a prune needs (Prunable,
// DeleteIntents): its ID, state, times and revision.
func (in Intent) Pruning() Intent {
	return Intent{ID: in.ID, State: in.State, CreatedAt: in.CreatedAt, FinishedAt: in.FinishedAt, Rev: in.Rev}
}

// Prunable reports whether an intent is done or failed and finished
// before olderThan (one without a finish time counts from its creation).
func Prunable(in Intent, olderThan time.Time) bool {
	at := in.FinishedAt
	if at.IsZero() {
		at = in.CreatedAt
	}
	return in.State != IntentOpen && at.Before(olderThan)
}

// DeleteIntents deletes the given intents, each only if its record is still
// at in.Rev (so an intent changed since, say reopened by a restore, is
// left), and returns how many it deleted. Only ID and Rev are read.
func (s *Store) DeleteIntents(ctx context.Context, old []Intent) (int, error) {
	n := 0
	for batch := range slices.Chunk(old, pruneBatch) {
		cmps := make([]clientv3.Cmp, 0, len(batch))
		ops := make([]clientv3.Op, 0, len(batch))
		for _, in := range batch {
			k := s.key(kindIntents, in.ID)
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", in.Rev))
			ops = append(ops, clientv3.OpDelete(k))
		}
		if f, ok := FenceFrom(ctx); ok {
			cmps = append(cmps, f.cmp())
		}
		s.countWrite("PruneIntents")
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return n, fmt.Errorf("prune intents: %w", err)
		}
		if resp.Succeeded {
			n += len(batch)
		}
	}
	return n, nil
}
