package store

import (
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"testing"
)

// TestFenceRefusesWritesOnceKeyIsGone checks the store side of leadership
// fencing: writes carrying a fence commit while the key exists with the
// fenced create revision, and are refused with rpcerr.ErrNotLeader, writing
// nothing, once it was deleted or re-created.
func TestFenceRefusesWritesOnceKeyIsGone(t *testing.T) {
	s := newBudgetStore(t, 100)
	ctx := ctxT(t)
	createENI(t, s, "eni-1", "i-1", "10.0.0.11", "10.0.0.12")
	key := s.ElectionPrefix() + "/694d"
	put, err := s.Client().Put(ctx, key, "a")
	if err != nil {
		t.Fatal(err)
	}
	fenced := WithFence(ctx, key, put.Header.Revision)

	if _, err := s.BeginIntent(fenced, Intent{ID: "int-1", Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 2}); err != nil {
		t.Fatalf("BeginIntent while holding the key: %v", err)
	}
	if _, err := s.ProposeRelease(fenced, Release{InstanceID: "i-1", ENIID: "eni-1", Addresses: []string{"10.0.0.11"}}); err != nil {
		t.Fatalf("ProposeRelease while holding the key: %v", err)
	}
	wantCounters(t, s, 3, 2)

	// The key is re-created by someone else: same name, newer revision.
	if _, err := s.Client().Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Put(ctx, key, "b"); err != nil {
		t.Fatal(err)
	}
	_, err = s.BeginIntent(fenced, Intent{ID: "int-2", Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 2})
	wantErr(t, err, rpcerr.ErrNotLeader)
	_, err = s.GetIntent(ctx, "int-2")
	wantErr(t, err, rpcerr.ErrNotFound)
	_, err = s.ProposeRelease(fenced, Release{InstanceID: "i-1", ENIID: "eni-1", Addresses: []string{"10.0.0.12"}})
	wantErr(t, err, rpcerr.ErrNotLeader)
	rels, err := s.ListReleases(ctx, "i-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(rels) != 1 {
		t.Fatalf("%d releases, want only the one proposed while leading", len(rels))
	}
	wantCounters(t, s, 3, 2)

	// Unfenced writes (agents, allotctl) are not affected.
	if _, err := s.BeginIntent(ctx, Intent{ID: "int-3", Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 1}); err != nil {
		t.Fatalf("unfenced BeginIntent: %v", err)
	}
	checkLedger(t, s)
}
