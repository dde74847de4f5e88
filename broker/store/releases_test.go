package store

import (
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"slices"
	"testing"
)

func TestReleaseHandshake(t *testing.T) {
	s := newBudgetStore(t, 100)
	ctx := ctxT(t)
	mustNode(t, s, "i-2")
	createENI(t, s, "eni-1", "i-1", "10.0.0.11", "10.0.0.12", "10.0.0.13")
	createENI(t, s, "eni-2", "i-2", "10.0.0.21")
	wantCounters(t, s, 4+2, 0)

	// Proposals are checked against the ENI record.
	_, err := s.ProposeRelease(ctx, Release{InstanceID: "i-1", ENIID: "eni-2", Addresses: []string{"10.0.0.21"}})
	wantErr(t, err, rpcerr.ErrNotOwner)
	_, err = s.ProposeRelease(ctx, Release{InstanceID: "i-1", ENIID: "eni-1", Addresses: []string{"10.0.0.99"}})
	wantErr(t, err, rpcerr.ErrInvalid)
	_, err = s.ProposeRelease(ctx, Release{InstanceID: "i-1", ENIID: "eni-1"})
	wantErr(t, err, rpcerr.ErrInvalid)
	_, err = s.ProposeRelease(ctx, Release{InstanceID: "i-1", ENIID: "eni-9", Addresses: []string{"10.0.0.11"}})
	wantErr(t, err, rpcerr.ErrNotFound)

	r, err := s.ProposeRelease(ctx, Release{InstanceID: "i-1", ENIID: "eni-1", Addresses: []string{"10.0.0.12", "10.0.0.11"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID == "" || r.State != ReleaseProposed || r.Rev == 0 {
		t.Fatalf("proposed %+v", r)
	}
	// An address can be in one open release only.
	_, err = s.ProposeRelease(ctx, Release{InstanceID: "i-1", ENIID: "eni-1", Addresses: []string{"10.0.0.11", "10.0.0.13"}})
	wantErr(t, err, rpcerr.ErrInvalid)

	// Nothing is unassigned before the agent answers.
	_, err = s.BeginIntent(ctx, Intent{Kind: IntentUnassign, InstanceID: "i-1", ENIID: "eni-1", ReleaseID: r.ID, Addresses: []string{"10.0.0.11"}})
	wantErr(t, err, rpcerr.ErrWrongState)
	wantErr(t, s.FinishRelease(ctx, r.ID), rpcerr.ErrWrongState)

	// Only the owner answers, and only about what was proposed.
	_, err = s.AckRelease(ctx, "i-2", r.ID, []string{"10.0.0.11"}, nil)
	wantErr(t, err, rpcerr.ErrNotOwner)
	_, err = s.AckRelease(ctx, "i-1", r.ID, []string{"10.0.0.13"}, nil)
	wantErr(t, err, rpcerr.ErrInvalid)
	_, err = s.AckRelease(ctx, "i-1", "rel-missing", nil, nil)
	wantErr(t, err, rpcerr.ErrNotFound)
	// 10.0.0.12 turned out to be in use: the agent acknowledges only .11.
	acked, err := s.AckRelease(ctx, "i-1", r.ID, []string{"10.0.0.11"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if acked.State != ReleaseAcked || !slices.Equal(acked.AckedAddrs, []string{"10.0.0.11"}) {
		t.Fatalf("acked %+v", acked)
	}
	if again, err := s.AckRelease(ctx, "i-1", r.ID, []string{"10.0.0.11"}, nil); err != nil || again.Rev != acked.Rev {
		t.Fatalf("repeating the same ack: %+v, %v; want a no-op", again, err)
	}
	_, err = s.AckRelease(ctx, "i-1", r.ID, []string{"10.0.0.11", "10.0.0.12"}, nil)
	wantErr(t, err, rpcerr.ErrWrongState)

	// The unassign may take only what was acknowledged, from the right node.
	_, err = s.BeginIntent(ctx, Intent{Kind: IntentUnassign, InstanceID: "i-1", ENIID: "eni-1", ReleaseID: r.ID, Addresses: []string{"10.0.0.11", "10.0.0.12"}})
	wantErr(t, err, rpcerr.ErrInvalid)
	_, err = s.BeginIntent(ctx, Intent{Kind: IntentUnassign, InstanceID: "i-2", ENIID: "eni-2", ReleaseID: r.ID, Addresses: []string{"10.0.0.21"}})
	wantErr(t, err, rpcerr.ErrNotOwner)
	un, err := s.BeginIntent(ctx, Intent{Kind: IntentUnassign, InstanceID: "i-1", ENIID: "eni-1", ReleaseID: r.ID, Addresses: []string{"10.0.0.11"}})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.CompleteUnassign(ctx, un.ID, "eni-1", []string{"10.0.0.12"}, nil), rpcerr.ErrInvalid)
	if err := s.CompleteUnassign(ctx, un.ID, "eni-1", []string{"10.0.0.11"}, nil); err != nil {
		t.Fatal(err)
	}
	wantCounters(t, s, 3+2, 0)
	e, _ := s.GetENI(ctx, "eni-1")
	if !slices.Equal(e.Addresses, []string{"10.0.0.12", "10.0.0.13"}) {
		t.Fatalf("eni-1 addresses %v after unassign", e.Addresses)
	}
	rels, err := s.ListReleases(ctx, "i-1")
	if err != nil || len(rels) != 1 || rels[0].State != ReleaseDone {
		t.Fatalf("releases of i-1 = %+v, %v; want one, done by the unassign", rels, err)
	}
	if err := s.FinishRelease(ctx, r.ID); err != nil {
		t.Fatalf("finishing a done release: %v", err)
	}
	wantErr(t, s.CancelRelease(ctx, r.ID), rpcerr.ErrWrongState)

	// A release for i-2, cancelled; and listing by node.
	r2, err := s.ProposeRelease(ctx, Release{InstanceID: "i-2", ENIID: "eni-2", Addresses: []string{"10.0.0.21"}})
	if err != nil {
		t.Fatal(err)
	}
	if all, _ := s.ListReleases(ctx, ""); len(all) != 2 {
		t.Fatalf("ListReleases(\"\") = %d, want 2", len(all))
	}
	if err := s.CancelRelease(ctx, r2.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.CancelRelease(ctx, r2.ID), rpcerr.ErrNotFound)
	if rels, _ := s.ListReleases(ctx, "i-2"); len(rels) != 0 {
		t.Fatalf("cancelled release still listed: %+v", rels)
	}
	if n, err := s.PruneReleases(ctx, e.CreatedAt.AddDate(1, 0, 0)); err != nil || n != 1 {
		t.Fatalf("PruneReleases = %d, %v; want the done one", n, err)
	}
}

func TestEmptyAckFinishes(t *testing.T) {
	s := newBudgetStore(t, 100)
	ctx := ctxT(t)
	createENI(t, s, "eni-1", "i-1", "10.0.0.11")
	r, err := s.ProposeRelease(ctx, Release{InstanceID: "i-1", ENIID: "eni-1", Addresses: []string{"10.0.0.11"}})
	if err != nil {
		t.Fatal(err)
	}
	// Everything proposed is in use: the agent acknowledges nothing.
	if _, err := s.AckRelease(ctx, "i-1", r.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.BeginIntent(ctx, Intent{Kind: IntentUnassign, InstanceID: "i-1", ENIID: "eni-1", ReleaseID: r.ID, Addresses: []string{"10.0.0.11"}})
	wantErr(t, err, rpcerr.ErrInvalid)
	if err := s.FinishRelease(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if e, _ := s.GetENI(ctx, "eni-1"); len(e.Addresses) != 1 {
		t.Fatalf("an unacknowledged address went away: %+v", e)
	}
	wantCounters(t, s, 2, 0)
}
