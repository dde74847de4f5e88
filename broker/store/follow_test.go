package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// nextUpdate returns the follower's next update or fails.
func nextUpdate(t *testing.T, f *Follower) FollowUpdate {
	t.Helper()
	select {
	case u, ok := <-f.Updates():
		if !ok {
			t.Fatal("follower closed")
		}
		return u
	case <-time.After(20 * time.Second):
		t.Fatal("no update from the follower")
	}
	return FollowUpdate{}
}

// changesUntil collects changes until the follower has delivered rev.
func changesUntil(t *testing.T, f *Follower, rev int64) []Change {
	t.Helper()
	var out []Change
	for got := int64(0); got < rev; {
		u := nextUpdate(t, f)
		if u.Err != nil || u.Snapshot != nil {
			t.Fatalf("unexpected update %+v", u)
		}
		out = append(out, u.Changes...)
		got = u.Rev
	}
	return out
}

func TestFollowSnapshotThenChanges(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	mustSubnet(t, s, "subnet-1", 100)
	mustNode(t, s, "i-1")
	if err := s.PutPrimaryENI(ctx, ENI{ID: "eni-p1", InstanceID: "i-1", SubnetID: "subnet-1", PrimaryIP: "10.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutDemand(ctx, Demand{InstanceID: "i-1", Pending: 2}); err != nil {
		t.Fatal(err)
	}

	f := s.Follow(ctx)
	first := nextUpdate(t, f)
	snap := first.Snapshot
	if snap == nil || first.Rev != snap.Rev || len(snap.Subnets) != 1 || len(snap.Nodes) != 1 || len(snap.ENIs) != 1 ||
		snap.ENIs[0].InstanceID != "i-1" || snap.ENIs[0].Rev == 0 || len(snap.Usage)+len(snap.Releases)+len(snap.Statuses) != 0 {
		t.Fatalf("first update %+v", first)
	}

	// A secondary ENI through its intents, a usage report, a status, then
	// the node's deletion (which removes its status too).
	in, err := s.BeginIntent(ctx, Intent{Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Count: 1, Reserved: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteCreate(ctx, in.ID, ENI{ID: "eni-2", Addresses: []string{"10.0.0.21"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutUsage(ctx, Usage{InstanceID: "i-1", Seq: 1, Free: []string{"10.0.0.21"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutNodeStatus(ctx, NodeStatus{InstanceID: "i-1", Reason: UnmetNodeFull}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteNode(ctx, "i-1"); err != nil {
		t.Fatal(err)
	}
	rev, err := readRev(ctx, s)
	if err != nil {
		t.Fatal(err)
	}

	type seen struct {
		kind    RecordKind
		id      string
		deleted bool
	}
	var got []seen
	var eni ENI
	for _, c := range changesUntil(t, f, rev) {
		got = append(got, seen{c.Kind, c.ID, c.Deleted})
		if c.Deleted != (c.Record == nil) {
			t.Errorf("change %+v: record present %v, deleted %v", c, c.Record != nil, c.Deleted)
		}
		if e, ok := c.Record.(ENI); ok {
			eni = e
		}
	}
	// The intent is not followed; the subnet's counters moved in the same
	// transactions as the ENI; deleting the node deleted its demand and
	// its (absent) alive key too, the latter not followed.
	want := []seen{
		{RecordSubnet, "subnet-1", false}, // BeginIntent reserves
		// CompleteCreate: the ENI, then its subnet's counters.
		{RecordENI, "eni-2", false}, {RecordSubnet, "subnet-1", false},
		{RecordUsage, "i-1", false},
		{RecordStatus, "i-1", false},
		// DeleteNode, which removes the node's usage too.
		{RecordNode, "i-1", true}, {RecordDemand, "i-1", true}, {RecordStatus, "i-1", true}, {RecordUsage, "i-1", true},
	}
	if len(got) != len(want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("changes %v, want %v", got, want)
		}
	}
	if eni.InstanceID != "i-1" || eni.Status != ENICreated || len(eni.Addresses) != 1 || eni.Rev == 0 {
		t.Fatalf("eni change %+v", eni)
	}

	// A write outside the prefix raises the revision without an event;
	// progress reports it once asked for.
	other, err := Open(s.Client(), "other")
	if err != nil {
		t.Fatal(err)
	}
	mustSubnet(t, other, "subnet-9", 10)
	outside, err := readRev(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for reached := int64(0); reached < outside; {
		if err := f.RequestProgress(); err != nil {
			t.Fatal(err)
		}
		select {
		case u := <-f.Updates():
			if len(u.Changes) != 0 || u.Snapshot != nil || u.Err != nil {
				t.Fatalf("update for a foreign write %+v", u)
			}
			reached = u.Rev
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no progress to revision %d", outside)
		}
	}

	// Resync reads everything again.
	f.Resync()
	u := nextUpdate(t, f)
	if u.Snapshot == nil || u.Snapshot.Rev < outside || len(u.Snapshot.Nodes) != 0 || len(u.Snapshot.ENIs) != 2 {
		t.Fatalf("update after resync %+v", u)
	}

	// A record that does not decode is an error, never a guess; the
	// follower reads everything again once it is fixed.
	if _, err := s.Client().Put(ctx, s.Prefix()+"enis/eni-bad", "garbage"); err != nil {
		t.Fatal(err)
	}
	u = nextUpdate(t, f)
	wantErr(t, u.Err, rpcerr.ErrCorrupt)
	if _, err := s.Client().Delete(ctx, s.Prefix()+"enis/eni-bad"); err != nil {
		t.Fatal(err)
	}
	for u = nextUpdate(t, f); u.Snapshot == nil; u = nextUpdate(t, f) {
		wantErr(t, u.Err, rpcerr.ErrCorrupt)
	}
	if len(u.Snapshot.ENIs) != 2 {
		t.Fatalf("snapshot after repair %+v", u.Snapshot)
	}

	cancel()
	for range f.Updates() {
	}
}

// readRev returns etcd's current revision.
func readRev(ctx context.Context, s *Store) (int64, error) {
	resp, err := s.Client().Get(ctx, s.Prefix()+"no-such-key")
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// TestFollowSetsAsideUndecodable: a node record that does not decode is
// left out of the snapshot and named in Quarantined; a usage record
// written undecodable later arrives as a deletion saying why; the other
// records and later changes still flow.
func TestFollowSetsAsideUndecodable(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	mustSubnet(t, s, "subnet-1", 100)
	mustNode(t, s, "i-1")
	if _, err := s.Client().Put(ctx, s.Prefix()+"nodes/i-bad", "{"); err != nil {
		t.Fatal(err)
	}
	f := s.Follow(ctx)
	first := nextUpdate(t, f)
	snap := first.Snapshot
	if snap == nil || len(snap.Nodes) != 1 || snap.Nodes[0].InstanceID != "i-1" || len(snap.Quarantined) != 1 ||
		snap.Quarantined[0].ID != "i-bad" || snap.Quarantined[0].Kind != "nodes" {
		t.Fatalf("first update %+v", first)
	}
	resp, err := s.Client().Put(ctx, s.Prefix()+"usage/i-1", `{"v":1,"instance_id":"i-2"}`)
	if err != nil {
		t.Fatal(err)
	}
	changes := changesUntil(t, f, resp.Header.Revision)
	if len(changes) != 1 || !changes[0].Deleted || changes[0].Quarantined == "" || changes[0].ID != "i-1" {
		t.Fatalf("changes %+v", changes)
	}
	sn, err := s.SetSubnetBudget(ctx, "subnet-1", 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	changes = changesUntil(t, f, sn.Rev)
	if len(changes) != 1 || changes[0].Kind != RecordSubnet || changes[0].Deleted {
		t.Fatalf("changes after the bad record %+v", changes)
	}
}

// TestFollowPodNetworks: pod networks are in the snapshot and their
// writes and deletes arrive as changes, for the budget figures that count
// nodes where their pods go.
func TestFollowPodNetworks(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	if _, err := s.PutPodNetwork(ctx, PodNetwork{Name: "a", SubnetIDs: []string{"subnet-1"}}, 0); err != nil {
		t.Fatal(err)
	}
	f := s.Follow(ctx)
	snap := nextUpdate(t, f).Snapshot
	if snap == nil || len(snap.PodNetworks) != 1 || snap.PodNetworks[0].Name != "a" {
		t.Fatalf("snapshot %+v", snap)
	}
	if _, err := s.PutPodNetwork(ctx, PodNetwork{Name: "a", SubnetIDs: []string{"subnet-2"}}, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePodNetwork(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	rev, err := readRev(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	changes := changesUntil(t, f, rev)
	if len(changes) != 2 || changes[0].Kind != RecordPodNetwork || changes[1].Kind != RecordPodNetwork || !changes[1].Deleted {
		t.Fatalf("changes %+v", changes)
	}
	if pn, ok := changes[0].Record.(PodNetwork); !ok || !slices.Equal(pn.SubnetIDs, []string{"subnet-2"}) {
		t.Errorf("first change %+v; want the network with subnet-2", changes[0].Record)
	}
}

// TestFollowIntents: with FollowIntents the snapshot holds the open
// intents (not the finished ones) and every begin and end arrives as a
// change; without it, intents are not reported at all.
func TestFollowIntents(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	mustSubnet(t, s, "subnet-1", 100)
	mustNode(t, s, "i-1")
	done, err := s.BeginIntent(ctx, Intent{Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.FailIntent(ctx, done.ID, errors.New("refused")); err != nil {
		t.Fatal(err)
	}
	open, err := s.BeginIntent(ctx, Intent{Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 3})
	if err != nil {
		t.Fatal(err)
	}

	plain, with := s.Follow(ctx), s.Follow(ctx, FollowIntents())
	if snap := nextUpdate(t, plain).Snapshot; snap == nil || len(snap.Intents) != 0 {
		t.Fatalf("without FollowIntents: snapshot %+v", snap)
	}
	snap := nextUpdate(t, with).Snapshot
	if snap == nil || len(snap.Intents) != 1 || snap.Intents[0].ID != open.ID || snap.Intents[0].State != IntentOpen {
		t.Fatalf("with FollowIntents: snapshot intents %+v, want only %s", snap, open.ID)
	}

	if err := s.FailIntent(ctx, open.ID, errors.New("refused")); err != nil {
		t.Fatal(err)
	}
	rev, err := readRev(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var ends []Intent
	for _, c := range changesUntil(t, with, rev) {
		if c.Kind == RecordIntent {
			ends = append(ends, c.Record.(Intent))
		}
	}
	if len(ends) != 1 || ends[0].ID != open.ID || ends[0].State != IntentFailed {
		t.Fatalf("intent changes %+v; want %s failed", ends, open.ID)
	}
	for _, c := range changesUntil(t, plain, rev) {
		if c.Kind == RecordIntent {
			t.Fatalf("without FollowIntents: change %+v", c)
		}
	}
}
