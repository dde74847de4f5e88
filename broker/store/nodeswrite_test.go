package store

import (
	"testing"
	"time"
)

// Registering again with nothing changed writes nothing: no etcd
// transaction, no new revision, and the returned record carries the
// revision it was written at. A change to any field is written.
func TestPutNodeUnchangedWritesNothing(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	n := Node{InstanceID: "i-1", InstanceType: "c5.xlarge", SubnetID: "subnet-1", SecurityGroups: []string{"sg-1"},
		Tags: map[string]string{"b": "2", "a": "1"}, Mode: "secondary-ip", MaxENIs: 4, IPv4PerENI: 15, WarmIPTarget: 14}
	first, err := s.PutNode(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	before, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writes := s.Writes()["PutNode"]

	// The broker fills RegisteredAt on every registration; the stored one
	// is kept, so the record is the same.
	again := n
	again.RegisteredAt = first.RegisteredAt.Add(time.Hour)
	got, err := s.PutNode(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	after, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("an unchanged registration moved etcd from revision %d to %d", before, after)
	}
	if w := s.Writes()["PutNode"]; w != writes {
		t.Fatalf("an unchanged registration sent %d etcd transactions", w-writes)
	}
	if got.Rev != first.Rev || !got.RegisteredAt.Equal(first.RegisteredAt) {
		t.Fatalf("unchanged registration returned rev %d registered %v, want the record's %d %v",
			got.Rev, got.RegisteredAt, first.Rev, first.RegisteredAt)
	}

	changed := n
	changed.WarmIPTarget = 10
	saved, err := s.PutNode(ctx, changed)
	if err != nil {
		t.Fatal(err)
	}
	if saved.Rev <= first.Rev {
		t.Fatalf("a changed registration kept revision %d", saved.Rev)
	}
	stored, err := s.GetNode(ctx, "i-1")
	if err != nil {
		t.Fatal(err)
	}
	if stored.WarmIPTarget != 10 || stored.Rev != saved.Rev {
		t.Fatalf("stored %+v, want the warm target 10 at revision %d", stored, saved.Rev)
	}
}
