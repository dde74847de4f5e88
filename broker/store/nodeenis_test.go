package store

import (
	"fmt"
	"reflect"
	"testing"
)

// TestNodeENIsSince: from what a follower knew of a node's ENIs at one
// revision, NodeENIsSince gives exactly what ListNodeENIs reads now: an ENI
// the node gained, one that changed, one that is gone; another node's
// ENIs written meanwhile are left out.
func TestNodeENIsSince(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	mustSubnet(t, s, "subnet-1", 100)
	mustNode(t, s, "i-1")
	mustNode(t, s, "i-2")
	if err := s.PutPrimaryENI(ctx, ENI{ID: "eni-p1", InstanceID: "i-1", SubnetID: "subnet-1", PrimaryIP: "10.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	createENI(t, s, "eni-a", "i-1", "10.0.0.11")
	createENI(t, s, "eni-gone", "i-1", "10.0.0.12")
	known, err := s.ListNodeENIs(ctx, "i-1")
	if err != nil {
		t.Fatal(err)
	}
	since, err := readRev(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	same := func(step string) {
		t.Helper()
		got, at, err := s.NodeENIsSince(ctx, "i-1", known, since)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		want, err := s.ListNodeENIs(ctx, "i-1")
		if err != nil {
			t.Fatal(err)
		}
		if at < since || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: NodeENIsSince gave %+v at %d\nListNodeENIs %+v", step, got, at, want)
		}
	}
	same("nothing changed")

	createENI(t, s, "eni-new", "i-1", "10.0.0.13")
	createENI(t, s, "eni-other", "i-2", "10.0.0.14")
	in, err := s.BeginIntent(ctx, Intent{Kind: IntentAttach, InstanceID: "i-1", ENIID: "eni-a", DeviceIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteAttach(ctx, in.ID, "eni-a", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Delete(ctx, s.Prefix()+"enis/eni-gone"); err != nil {
		t.Fatal(err)
	}
	same("gained, changed, gone")

	got, _, err := s.NodeENIsSince(ctx, "i-1", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Errorf("knowing nothing: %+v; want the node's 3 ENIs", got)
	}
}

// TestNodeENIsSinceManyKnown: a node said to have more ENIs than one
// transaction may read by name is read in full, not refused by etcd.
func TestNodeENIsSinceManyKnown(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	mustSubnet(t, s, "subnet-1", 100)
	mustNode(t, s, "i-1")
	if err := s.PutPrimaryENI(ctx, ENI{ID: "eni-p1", InstanceID: "i-1", SubnetID: "subnet-1", PrimaryIP: "10.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	known := make([]ENI, 200)
	for i := range known {
		known[i] = ENI{ID: fmt.Sprintf("eni-%03d", i), InstanceID: "i-1"}
	}
	got, _, err := s.NodeENIsSince(ctx, "i-1", known, 1)
	if err != nil || len(got) != 1 || got[0].ID != "eni-p1" {
		t.Fatalf("NodeENIsSince with 200 known: %+v, %v; want eni-p1 alone", got, err)
	}
}
