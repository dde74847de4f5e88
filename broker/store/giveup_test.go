package store

import (
	"testing"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// ackedRelease proposes and acknowledges a release of addrs on an ENI.
func ackedRelease(t *testing.T, s *Store, instance, eni string, proposed, acked []string) Release {
	t.Helper()
	ctx := ctxT(t)
	r, err := s.ProposeRelease(ctx, Release{InstanceID: instance, ENIID: eni, Addresses: proposed})
	if err != nil {
		t.Fatal(err)
	}
	r, err = s.AckRelease(ctx, instance, r.ID, acked, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGiveUpNeedsTheWholeENIAcknowledged: an ENI is detached and deleted
// for a release only if the release is acknowledged and covers every
// address the ENI's record lists; the primary ENI never is.
func TestGiveUpNeedsTheWholeENIAcknowledged(t *testing.T) {
	s := newBudgetStore(t, 100)
	ctx := ctxT(t)
	mustNode(t, s, "i-2")
	createENI(t, s, "eni-1", "i-1", "10.0.0.11", "10.0.0.12")
	createENI(t, s, "eni-2", "i-2", "10.0.0.21")
	if err := s.PutPrimaryENI(ctx, ENI{ID: "eni-p", InstanceID: "i-1", SubnetID: "subnet-1", PrimaryIP: "10.0.0.5", Addresses: []string{"10.0.0.6"}}); err != nil {
		t.Fatal(err)
	}
	detach := func(eni, instance, rel string) error {
		_, err := s.BeginIntent(ctx, Intent{Kind: IntentDetach, InstanceID: instance, ENIID: eni, SubnetID: "subnet-1", ReleaseID: rel})
		return err
	}

	// Proposed, not yet acknowledged: nothing may go.
	partial, err := s.ProposeRelease(ctx, Release{InstanceID: "i-1", ENIID: "eni-1", Addresses: []string{"10.0.0.11", "10.0.0.12"}})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, detach("eni-1", "i-1", partial.ID), rpcerr.ErrWrongState)
	// The agent acknowledges one of two: the other keeps the ENI.
	if _, err := s.AckRelease(ctx, "i-1", partial.ID, []string{"10.0.0.11"}, nil); err != nil {
		t.Fatal(err)
	}
	wantErr(t, detach("eni-1", "i-1", partial.ID), rpcerr.ErrInvalid)
	_, err = s.BeginIntent(ctx, Intent{Kind: IntentDelete, InstanceID: "i-1", ENIID: "eni-1", SubnetID: "subnet-1", ReleaseID: partial.ID})
	wantErr(t, err, rpcerr.ErrInvalid)
	if err := s.CancelRelease(ctx, partial.ID); err != nil {
		t.Fatal(err)
	}

	// The primary ENI is never given up, whatever was acknowledged.
	prim := ackedRelease(t, s, "i-1", "eni-p", []string{"10.0.0.6"}, []string{"10.0.0.6"})
	wantErr(t, detach("eni-p", "i-1", prim.ID), rpcerr.ErrInvalid)
	// Another node's release, or a release for another ENI, does not count.
	other := ackedRelease(t, s, "i-2", "eni-2", []string{"10.0.0.21"}, []string{"10.0.0.21"})
	wantErr(t, detach("eni-1", "i-1", other.ID), rpcerr.ErrNotOwner)
	wantErr(t, detach("eni-2", "i-2", prim.ID), rpcerr.ErrNotOwner)
	// Only detach and delete carry a release besides unassign.
	_, err = s.BeginIntent(ctx, Intent{Kind: IntentModify, InstanceID: "i-1", ENIID: "eni-1", ReleaseID: prim.ID})
	wantErr(t, err, rpcerr.ErrInvalid)
	wantCounters(t, s, 3+2+1, 0)

	// The whole ENI acknowledged: detach, then delete; recording the delete
	// drops the ENI and its addresses and finishes the release at once.
	whole := ackedRelease(t, s, "i-1", "eni-1", []string{"10.0.0.11", "10.0.0.12"}, []string{"10.0.0.11", "10.0.0.12"})
	d, err := s.BeginIntent(ctx, Intent{Kind: IntentDetach, InstanceID: "i-1", ENIID: "eni-1", SubnetID: "subnet-1", ReleaseID: whole.ID})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteDetach(ctx, d.ID, "eni-1"); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.GetRelease(ctx, whole.ID); r.State != ReleaseAcked {
		t.Fatalf("release %s after the detach: %s; want still acknowledged until the delete", whole.ID, r.State)
	}
	if e, _ := s.GetENI(ctx, "eni-1"); e.Status != ENIDetached || len(e.Addresses) != 2 {
		t.Fatalf("eni-1 after the detach: %+v; want detached, still listing its addresses", e)
	}
	del, err := s.BeginIntent(ctx, Intent{Kind: IntentDelete, InstanceID: "i-1", ENIID: "eni-1", SubnetID: "subnet-1", ReleaseID: whole.ID})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.CompleteGiveUp(ctx, d.ID, "eni-1"), rpcerr.ErrInvalid) // a detach intent is not a delete
	if err := s.CompleteGiveUp(ctx, del.ID, "eni-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetENI(ctx, "eni-1"); err == nil {
		t.Fatal("eni-1 still recorded after its delete")
	}
	if r, _ := s.GetRelease(ctx, whole.ID); r.State != ReleaseDone {
		t.Fatalf("release %s after the delete: %s; want done", whole.ID, r.State)
	}
	if err := s.CompleteGiveUp(ctx, del.ID, "eni-1"); err != nil {
		t.Fatalf("completing the delete again: %v; want a no-op", err)
	}
	wantCounters(t, s, 2+1, 0)
}
