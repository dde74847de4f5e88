package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// ProposeRelease records that the broker wants r's addresses and prefixes
// back from the node (state proposed). They must all be on the ENI r names,
// which must belong to r.InstanceID (rpcerr.ErrNotOwner), and none may be in
// another open release. Nothing is taken back until the agent acknowledges.
func (s *Store) ProposeRelease(ctx context.Context, r Release) (Release, error) {
	out, errs, err := s.ProposeReleases(ctx, []Release{r})
	if err != nil {
		return Release{}, err
	}
	if errs[0] != nil {
		return Release{}, errs[0]
	}
	return out[0], nil
}

// releaseBatch is the most proposals one transaction holds: each compares
// its ENI's record and puts its release, well within etcd's 128 operations
// a transaction.
const releaseBatch = 25

// ProposeReleases proposes several releases, each checked as ProposeRelease
// checks it, up to releaseBatch in one transaction: every proposal would
// otherwise read every release record on its own (the check that no
// address is in two open releases), and a broker proposing for thousands of
// nodes after a burst would read them thousands of times. A proposal that
// fails its checks gets its error in errs (same index) and is left out; the
// others are recorded. err is a failure of the transaction itself: then
// proposals of that batch and later ones have no result.
func (s *Store) ProposeReleases(ctx context.Context, rels []Release) (out []Release, errs []error, err error) {
	out, errs = make([]Release, len(rels)), make([]error, len(rels))
	for i := range rels {
		out[i], errs[i] = newRelease(rels[i])
	}
	for lo := 0; lo < len(rels); lo += releaseBatch {
		hi := min(lo+releaseBatch, len(rels))
		if err := s.proposeBatch(ctx, out[lo:hi], errs[lo:hi]); err != nil {
			return out, errs, err
		}
	}
	return out, errs, nil
}

// newRelease checks a proposal's own fields and gives it its ID, state and
// time.
func newRelease(r Release) (Release, error) {
	if err := checkID("release: node", r.InstanceID); err != nil {
		return Release{}, err
	}
	if err := checkID("release: eni", r.ENIID); err != nil {
		return Release{}, err
	}
	if len(r.Addresses)+len(r.Prefixes) == 0 {
		return Release{}, fmt.Errorf("release from %s: no addresses or prefixes: %w", r.InstanceID, rpcerr.ErrInvalid)
	}
	if err := checkAddrs("release from "+r.InstanceID, r.Addresses, r.Prefixes); err != nil {
		return Release{}, err
	}
	r.ID = newID("rel-")
	r.State, r.AckedAddrs, r.AckedPfx = ReleaseProposed, nil, nil
	r.Addresses, r.Prefixes = union(nil, r.Addresses), union(nil, r.Prefixes)
	r.CreatedAt = time.Now().UTC()
	return r, nil
}

// proposeBatch records the proposals of rels whose errs entry is nil in one
// transaction, setting errs for those that fail their checks and the
// revision of those recorded. Reading the whole releases prefix makes the
// commit compare it: a concurrent proposal of the same address makes the
// batch re-decide.
func (s *Store) proposeBatch(ctx context.Context, rels []Release, errs []error) error {
	var keys []string
	for i, r := range rels {
		if errs[i] == nil {
			keys = append(keys, s.key(kindENIs, r.ENIID))
		}
	}
	if len(keys) == 0 {
		return nil
	}
	failed := make([]error, len(rels))
	rev, err := s.update(ctx, "ProposeRelease", keys, []string{s.dir(kindReleases)}, func(v *view) error {
		open, err := list[*Release](v, kindReleases)
		if err != nil {
			return err
		}
		open = slices.DeleteFunc(open, func(o Release) bool { return o.State == ReleaseDone })
		for i := range rels {
			if failed[i] = nil; errs[i] != nil {
				continue
			}
			if failed[i], err = checkProposal(v, rels[i], open); err != nil {
				return err
			}
			if failed[i] != nil {
				continue
			}
			if err := v.put(s.key(kindReleases, rels[i].ID), &rels[i]); err != nil {
				return err
			}
			open = append(open, rels[i])
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := range rels {
		switch {
		case errs[i] != nil:
		case failed[i] != nil:
			errs[i] = failed[i]
		default:
			rels[i].Rev = rev
		}
	}
	return nil
}

// checkProposal says why r cannot be proposed (nil: it can) given the open
// releases: its ENI must exist, belong to its node and hold every address
// and prefix, none of which may be in an open release. err is a failure to
// read (errWant among them).
func checkProposal(v *view, r Release, open []Release) (refused, err error) {
	var e ENI
	ok, err := get(v, kindENIs, r.ENIID, &e)
	if err != nil {
		return nil, err
	}
	switch {
	case !ok:
		return fmt.Errorf("release: eni %s: %w", r.ENIID, rpcerr.ErrNotFound), nil
	case e.InstanceID != r.InstanceID:
		return fmt.Errorf("release: eni %s belongs to %s, not %s: %w", r.ENIID, e.InstanceID, r.InstanceID, rpcerr.ErrNotOwner), nil
	}
	if a := missingFrom(r.Addresses, e.Addresses); a != "" {
		return fmt.Errorf("release: address %s is not a secondary address of eni %s: %w", a, e.ID, rpcerr.ErrInvalid), nil
	}
	if p := missingFrom(r.Prefixes, e.Prefixes); p != "" {
		return fmt.Errorf("release: prefix %s is not on eni %s: %w", p, e.ID, rpcerr.ErrInvalid), nil
	}
	for _, o := range open {
		if a := firstCommon(r.Addresses, o.Addresses); a != "" {
			return fmt.Errorf("release: address %s is already in release %s: %w", a, o.ID, rpcerr.ErrInvalid), nil
		}
		if p := firstCommon(r.Prefixes, o.Prefixes); p != "" {
			return fmt.Errorf("release: prefix %s is already in release %s: %w", p, o.ID, rpcerr.ErrInvalid), nil
		}
	}
	return nil, nil
}

// AckRelease records the agent's answer: of the proposal, these addresses
// and prefixes are free and may be taken back (possibly none). Only the
// node the release belongs to may answer (rpcerr.ErrNotOwner), and only with what
// was proposed (rpcerr.ErrInvalid). Repeating the same answer is a no-op; a
// different answer after the first is rpcerr.ErrWrongState.
func (s *Store) AckRelease(ctx context.Context, instanceID, releaseID string, addrs, prefixes []string) (Release, error) {
	if err := checkID("release", releaseID); err != nil {
		return Release{}, err
	}
	if err := checkID("release: node", instanceID); err != nil {
		return Release{}, err
	}
	addrs, prefixes = union(nil, addrs), union(nil, prefixes)
	key := s.key(kindReleases, releaseID)
	var out Release
	wrote := false
	rev, err := s.update(ctx, "AckRelease", []string{key}, nil, func(v *view) error {
		wrote = false
		var r Release
		ok, err := get(v, kindReleases, releaseID, &r)
		if err != nil {
			return err
		}
		switch {
		case !ok:
			return fmt.Errorf("release %s: %w", releaseID, rpcerr.ErrNotFound)
		case r.InstanceID != instanceID:
			return fmt.Errorf("release %s belongs to %s, not %s: %w", releaseID, r.InstanceID, instanceID, rpcerr.ErrNotOwner)
		}
		if a := missingFrom(addrs, r.Addresses); a != "" {
			return fmt.Errorf("release %s did not propose address %s: %w", releaseID, a, rpcerr.ErrInvalid)
		}
		if p := missingFrom(prefixes, r.Prefixes); p != "" {
			return fmt.Errorf("release %s did not propose prefix %s: %w", releaseID, p, rpcerr.ErrInvalid)
		}
		if r.State != ReleaseProposed {
			if slices.Equal(union(nil, r.AckedAddrs), addrs) && slices.Equal(union(nil, r.AckedPfx), prefixes) {
				out = r
				return nil
			}
			return fmt.Errorf("release %s was already answered (%s) differently: %w", releaseID, r.State, rpcerr.ErrWrongState)
		}
		r.State, r.AckedAddrs, r.AckedPfx = ReleaseAcked, addrs, prefixes
		out, wrote = r, true
		return v.put(key, &out)
	})
	if err != nil {
		return Release{}, err
	}
	if wrote {
		out.Rev = rev
	}
	return out, nil
}

// ListReleases returns one node's releases ("" for all), oldest first.
func (s *Store) ListReleases(ctx context.Context, instanceID string) ([]Release, error) {
	all, err := listAll[*Release](ctx, s, kindReleases)
	if err != nil {
		return nil, err
	}
	if instanceID != "" {
		all = slices.DeleteFunc(all, func(r Release) bool { return r.InstanceID != instanceID })
	}
	slices.SortFunc(all, func(a, b Release) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return all, nil
}

// GetRelease returns one release.
func (s *Store) GetRelease(ctx context.Context, id string) (Release, error) {
	return getOne[*Release](ctx, s, kindReleases, "release", id)
}

// FinishRelease marks an acknowledged release done (its addresses were
// unassigned, or there was nothing acknowledged to unassign). Finishing a
// done release is a no-op; an unacknowledged one is rpcerr.ErrWrongState.
func (s *Store) FinishRelease(ctx context.Context, id string) error {
	return s.changeRelease(ctx, "FinishRelease", id, func(v *view, r *Release) error {
		switch r.State {
		case ReleaseDone:
			return nil
		case ReleaseProposed:
			return fmt.Errorf("release %s was not acknowledged: %w", id, rpcerr.ErrWrongState)
		}
		r.State = ReleaseDone
		return v.put(s.key(kindReleases, id), r)
	})
}

// CancelRelease withdraws a proposed or acknowledged release (deletes it).
// A done release cannot be cancelled (rpcerr.ErrWrongState); PruneReleases removes
// those.
func (s *Store) CancelRelease(ctx context.Context, id string) error {
	return s.changeRelease(ctx, "CancelRelease", id, func(v *view, r *Release) error {
		if r.State == ReleaseDone {
			return fmt.Errorf("release %s is already done: %w", id, rpcerr.ErrWrongState)
		}
		v.del(s.key(kindReleases, id))
		return nil
	})
}

func (s *Store) changeRelease(ctx context.Context, method, id string, change func(*view, *Release) error) error {
	if err := checkID("release", id); err != nil {
		return err
	}
	_, err := s.update(ctx, method, []string{s.key(kindReleases, id)}, nil, func(v *view) error {
		var r Release
		ok, err := get(v, kindReleases, id, &r)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("release %s: %w", id, rpcerr.ErrNotFound)
		}
		return change(v, &r)
	})
	return err
}

// PruneReleases deletes done releases created before olderThan and returns
// how many.
func (s *Store) PruneReleases(ctx context.Context, olderThan time.Time) (int, error) {
	all, err := s.ListReleases(ctx, "")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range all {
		if r.State != ReleaseDone || !r.CreatedAt.Before(olderThan) {
			continue
		}
		err := s.changeRelease(ctx, "PruneReleases", r.ID, func(v *view, cur *Release) error {
			if cur.State == ReleaseDone {
				v.del(s.key(kindReleases, r.ID))
			}
			return nil
		})
		if err == nil {
			n++
		}
	}
	return n, nil
}

// firstCommon returns the first member of a also in b, or "".
func firstCommon(a, b []string) string {
	for _, x := range a {
		if slices.Contains(b, x) {
			return x
		}
	}
	return ""
}
