package store

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
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

// TestProposeReleasesBatch proposes more releases than one transaction
// holds, among them some the store must refuse: each refused one gets its
// own error and the others are recorded, as one at a time would.
func TestProposeReleasesBatch(t *testing.T) {
	s := newBudgetStore(t, 1000)
	ctx := ctxT(t)
	const nodes = releaseBatch + 5
	var rels []Release
	for i := range nodes {
		inst, eni := fmt.Sprintf("i-%d", i), fmt.Sprintf("eni-%d", i)
		if i > 0 {
			mustNode(t, s, inst)
		}
		createENI(t, s, eni, inst, fmt.Sprintf("10.1.%d.1", i), fmt.Sprintf("10.1.%d.2", i))
		rels = append(rels, Release{InstanceID: inst, ENIID: eni, Addresses: []string{fmt.Sprintf("10.1.%d.1", i)}})
	}
	open, err := s.ProposeRelease(ctx, Release{InstanceID: "i-3", ENIID: "eni-3", Addresses: []string{"10.1.3.1"}})
	if err != nil {
		t.Fatal(err)
	}
	rels[2].ENIID = "eni-4"                  // another node's ENI
	rels[5].Addresses = nil                  // nothing to release
	rels[7].Addresses = []string{"10.1.8.1"} // not on its ENI
	// rels[3] repeats the open release's address; rels[9] and rels[10]
	// name the same address of one ENI: the first is recorded.
	rels[10] = Release{InstanceID: "i-9", ENIID: "eni-9", Addresses: []string{"10.1.9.2", "10.1.9.1"}}
	out, errs, err := s.ProposeReleases(ctx, rels)
	if err != nil {
		t.Fatal(err)
	}
	refused := map[int]error{2: rpcerr.ErrNotOwner, 3: rpcerr.ErrInvalid, 5: rpcerr.ErrInvalid, 7: rpcerr.ErrInvalid, 10: rpcerr.ErrInvalid}
	for i := range rels {
		if want, ok := refused[i]; ok {
			wantErr(t, errs[i], want)
			continue
		}
		if errs[i] != nil || out[i].ID == "" || out[i].Rev == 0 || out[i].State != ReleaseProposed {
			t.Fatalf("proposal %d: %+v, %v", i, out[i], errs[i])
		}
	}
	all, err := s.ListReleases(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + nodes - len(refused); len(all) != want {
		t.Fatalf("%d releases recorded, want %d", len(all), want)
	}
	for _, r := range all {
		if r.ID != open.ID && !slices.ContainsFunc(out, func(o Release) bool { return o.ID == r.ID }) {
			t.Fatalf("release %+v recorded but not returned", r)
		}
	}
}

// BenchmarkProposeReleases proposes a release for each of 300 nodes, one
// transaction each or several to a transaction, with the releases of a
// burst's end already recorded (done, kept for the record): each
// transaction reads every release record.
func BenchmarkProposeReleases(b *testing.B) {
	const nodes = 300
	for _, batched := range []bool{false, true} {
		b.Run(map[bool]string{false: "one-each", true: "batched"}[batched], func(b *testing.B) {
			s, err := Open(etcdembedtest.Start(b), "bench")
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if _, err := s.PutSubnet(ctx, Subnet{ID: "subnet-1", Usable: 1 << 20}); err != nil {
				b.Fatal(err)
			}
			var rels []Release
			for i := range nodes {
				inst, eni := fmt.Sprintf("i-%d", i), fmt.Sprintf("eni-%d", i)
				in, err := s.BeginIntent(ctx, Intent{Kind: IntentCreate, InstanceID: inst, SubnetID: "subnet-1", Reserved: 1 + 2*(int64(b.N)+2), ClientToken: "tok-" + eni})
				if err != nil {
					b.Fatal(err)
				}
				var addrs []string
				for k := range 2 * (b.N + 2) {
					addrs = append(addrs, fmt.Sprintf("10.%d.%d.%d", i/250, i%250, k+1))
				}
				if err := s.CompleteCreate(ctx, in.ID, ENI{ID: eni, PrimaryIP: "10.9.9.9", Addresses: addrs}); err != nil {
					b.Fatal(err)
				}
				rels = append(rels, Release{InstanceID: inst, ENIID: eni, Addresses: addrs})
			}
			b.ResetTimer()
			for n := range b.N {
				due := make([]Release, nodes)
				for i, r := range rels {
					r.Addresses = r.Addresses[2*n : 2*n+2]
					due[i] = r
				}
				if batched {
					if _, _, err := s.ProposeReleases(ctx, due); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for _, r := range due {
					if _, err := s.ProposeRelease(ctx, r); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
