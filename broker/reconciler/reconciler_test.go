package reconciler_test

import (
	"errors"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/reconciler"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// TestLeakedENICollection: only an available ENI carrying our cluster and
// owner tags, with no record and no open intent, seen on two passes at least
// the grace apart, and still so when described again, is deleted.
func TestLeakedENICollection(t *testing.T) {
	e := newEnv(t, 1)
	inst := e.insts[0].ID
	ctx := ctxT(t)

	leak := e.create(t, ours(inst), 2)                                              // collected
	other := e.create(t, ec2client.OwnerTags("other-cluster", inst, time.Now()), 0) // another cluster's
	noOwner := e.create(t, map[string]string{ec2client.TagCluster: cluster}, 0)     // not tagged as the broker's
	untagged := e.create(t, nil, 0)                                                 // nobody's we know
	inUse := e.create(t, ours(inst), 0)                                             // ours, attached: for the operator
	recorded := e.create(t, ours(inst), 1)                                          // ours, with a record
	tokenTags := ours(inst)
	tokenTags[executor.TagClientToken] = "xpendingcreate"
	inFlight := e.create(t, tokenTags, 0)       // a create intent still open
	attachedLater := e.create(t, ours(inst), 0) // attached between the passes
	e.attach(t, inUse.ID, inst, 1, false)
	e.record(t, recorded, inst, 0)
	if _, err := e.st.BeginIntent(ctx, store.Intent{ID: "xpendingcreate", Kind: store.IntentCreate, InstanceID: inst,
		SubnetID: subnetID, ClientToken: "xpendingcreate", Reserved: 1}); err != nil {
		t.Fatal(err)
	}

	// A fresh reconciler's Check reports and changes nothing.
	rep, err := reconciler.New(reconciler.Config{Cluster: cluster, Store: e.st, EC2: e.ec2}).Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(reconciler.KindLeakedENI) != 3 {
		t.Errorf("check found %d leaks, want 3 (leak, in use, attached later): %+v", rep.Count(reconciler.KindLeakedENI), rep.Findings)
	}
	for _, f := range rep.Findings {
		if f.Action != reconciler.ActionReported {
			t.Errorf("check did something: %+v", f)
		}
	}

	rep = e.pass(t)
	if a := action(rep, reconciler.KindLeakedENI, leak.ID); a != reconciler.ActionWatching {
		t.Errorf("first pass: leak %s: %q, want watching", leak.ID, a)
	}
	if a := action(rep, reconciler.KindLeakedENI, inUse.ID); a != reconciler.ActionReported {
		t.Errorf("first pass: attached ENI %s: %q, want reported only", inUse.ID, a)
	}
	// A second pass within the grace: seen twice, but not long enough apart.
	rep = e.pass(t)
	if a := action(rep, reconciler.KindLeakedENI, leak.ID); a != reconciler.ActionWatching || !e.exists(leak.ID) {
		t.Errorf("second pass within the grace: %q, exists %v; want watching and still there", a, e.exists(leak.ID))
	}
	e.attach(t, attachedLater.ID, inst, 2, false)
	time.Sleep(grace)
	rep = e.pass(t)
	if a := action(rep, reconciler.KindLeakedENI, leak.ID); a != reconciler.ActionCollected {
		t.Errorf("pass after the grace: leak %s: %q, want collected", leak.ID, a)
	}
	if a := action(rep, reconciler.KindLeakedENI, attachedLater.ID); a == reconciler.ActionCollected {
		t.Errorf("ENI attached between passes was collected")
	}
	if e.exists(leak.ID) {
		t.Errorf("leaked ENI %s still exists", leak.ID)
	}
	for _, x := range []ec2client.ENIInfo{other, noOwner, untagged, inUse, recorded, inFlight, attachedLater} {
		if !e.exists(x.ID) {
			t.Errorf("ENI %s was deleted; only %s should have been", x.ID, leak.ID)
		}
	}
	if n := e.sim.Counters()["DeleteNetworkInterface"].Calls; n != 1 {
		t.Errorf("%d deletes, want 1", n)
	}
	if s := e.rec.Stats(); s.Collected != 1 {
		t.Errorf("stats %+v, want one collected", s)
	}
	// The delete is on record, as an intent of the reconciler's, done.
	all, _ := e.st.ListIntents(ctx)
	var onRecord bool
	for _, in := range all {
		onRecord = onRecord || (in.Kind == store.IntentDelete && in.ENIID == leak.ID && in.State == store.IntentDone)
	}
	if !onRecord {
		t.Errorf("no done delete intent for %s", leak.ID)
	}
}

// TestMissingENIRecordForgotten: a recorded ENI that EC2 no longer has is
// reported, and its record removed only after EC2 said so on two passes
// the grace apart; the subnet's count is corrected with it.
func TestMissingENIRecordForgotten(t *testing.T) {
	e := newEnv(t, 1)
	inst := e.insts[0].ID
	ctx := ctxT(t)
	x := e.create(t, ours(inst), 3)
	e.record(t, x, inst, 0)
	if err := e.ec2.DeleteENI(ctx, x.ID); err != nil { // someone else deleted it
		t.Fatal(err)
	}
	rep := e.pass(t)
	if a := action(rep, reconciler.KindMissingENI, x.ID); a != reconciler.ActionWatching {
		t.Fatalf("first pass: %q, want watching: %+v", a, rep.Findings)
	}
	if _, err := e.st.GetENI(ctx, x.ID); err != nil {
		t.Fatalf("record removed after one pass: %v", err)
	}
	time.Sleep(grace)
	rep = e.pass(t)
	if a := action(rep, reconciler.KindMissingENI, x.ID); a != reconciler.ActionForgotten {
		t.Fatalf("second pass: %q, want forgotten: %+v", a, rep.Findings)
	}
	if _, err := e.st.GetENI(ctx, x.ID); !errors.Is(err, rpcerr.ErrNotFound) {
		t.Errorf("record still there: %v", err)
	}
	e.checkAccounts(t)
}

// TestGoneInstanceReleased: once EC2 no longer knows a node's instance (on
// two passes), its ENIs are released: the one EC2 deleted with the instance
// is forgotten, the one left available is deleted, and the node's records
// go. The other node is untouched.
func TestGoneInstanceReleased(t *testing.T) {
	e := newEnv(t, 2)
	gone, stays := e.insts[0].ID, e.insts[1].ID
	ctx := ctxT(t)
	withDoT := e.create(t, ours(gone), 2)
	e.attach(t, withDoT.ID, gone, 1, true)
	e.record(t, withDoT, gone, 1)
	withoutDoT := e.create(t, ours(gone), 2)
	e.attach(t, withoutDoT.ID, gone, 2, false)
	e.record(t, withoutDoT, gone, 2)
	kept := e.create(t, ours(stays), 1)
	e.attach(t, kept.ID, stays, 1, true)
	e.record(t, kept, stays, 1)

	if err := e.sim.RemoveInstance(gone); err != nil {
		t.Fatal(err)
	}
	rep := e.pass(t)
	if a := action(rep, reconciler.KindInstanceGone, gone); a != reconciler.ActionWatching {
		t.Fatalf("first pass: %q, want watching: %+v", a, rep.Findings)
	}
	if !e.exists(withoutDoT.ID) {
		t.Fatalf("ENI deleted after one pass")
	}
	time.Sleep(grace)
	rep = e.pass(t)
	if a := action(rep, reconciler.KindInstanceGone, gone); a != reconciler.ActionReleased {
		t.Fatalf("second pass: %q, want released: %+v", a, rep.Findings)
	}
	if e.exists(withoutDoT.ID) {
		t.Errorf("available ENI %s of the gone instance still exists", withoutDoT.ID)
	}
	if _, err := e.st.GetNode(ctx, gone); !errors.Is(err, rpcerr.ErrNotFound) {
		t.Errorf("node %s still registered: %v", gone, err)
	}
	enis, _ := e.st.ListENIs(ctx)
	for _, x := range enis {
		if x.InstanceID == gone {
			t.Errorf("record of %s (%s) remains", x.ID, gone)
		}
	}
	if _, err := e.st.GetNode(ctx, stays); err != nil {
		t.Errorf("other node gone: %v", err)
	}
	if _, err := e.st.GetENI(ctx, kept.ID); err != nil || !e.exists(kept.ID) {
		t.Errorf("other node's ENI touched: %v", err)
	}
	e.checkAccounts(t)
}

// TestSubnetUsedByOthers: what EC2's free count says is used and is not
// ours is recorded as used by others, but not while a reservation is in
// flight in the subnet.
func TestSubnetUsedByOthers(t *testing.T) {
	e := newEnv(t, 1)
	ctx := ctxT(t)
	e.create(t, nil, 5) // someone else's ENI: 6 addresses
	x := e.create(t, ours(e.insts[0].ID), 2)
	e.record(t, x, e.insts[0].ID, 0) // ours: 3 addresses

	in, err := e.st.BeginIntent(ctx, store.Intent{Kind: store.IntentCreate, InstanceID: e.insts[0].ID, SubnetID: subnetID, Reserved: 4})
	if err != nil {
		t.Fatal(err)
	}
	rep := e.pass(t)
	if a := action(rep, reconciler.KindSubnetUse, subnetID); a != reconciler.ActionSkipped {
		t.Errorf("with a reservation in flight: %q, want skipped", a)
	}
	if err := e.st.FailIntent(ctx, in.ID, errors.New("test")); err != nil {
		t.Fatal(err)
	}
	rep = e.pass(t)
	if a := action(rep, reconciler.KindSubnetUse, subnetID); a != reconciler.ActionUpdated {
		t.Errorf("%q, want updated: %+v", a, rep.Findings)
	}
	sn, err := e.st.GetSubnet(ctx, subnetID)
	if err != nil {
		t.Fatal(err)
	}
	// The instance's primary address and the other ENI's six.
	if sn.UsedByOthers != 7 {
		t.Errorf("used by others %d, want 7", sn.UsedByOthers)
	}
	if rep := e.pass(t); rep.Count(reconciler.KindSubnetUse) != 0 {
		t.Errorf("still drifting after the update: %+v", rep.Findings)
	}
}

// TestNothingReleasedWhenEC2ShowsNothing: when EC2 shows none of the
// cluster's instances (a wrong region or account looks exactly like this),
// the reconciler reports it and releases nothing, however often it looks.
func TestNothingReleasedWhenEC2ShowsNothing(t *testing.T) {
	e := newEnv(t, 2)
	ctx := ctxT(t)
	for _, inst := range e.insts {
		x := e.create(t, ours(inst.ID), 1)
		e.attach(t, x.ID, inst.ID, 1, false)
		e.record(t, x, inst.ID, 1)
	}
	for _, inst := range e.insts {
		if err := e.sim.RemoveInstance(inst.ID); err != nil {
			t.Fatal(err)
		}
	}
	var rep reconciler.Report
	for range 3 {
		rep = e.pass(t)
		time.Sleep(grace)
	}
	if n := rep.Count(reconciler.KindInstanceGone); n != 2 {
		t.Fatalf("%d instance-gone findings, want 2: %+v", n, rep.Findings)
	}
	for _, f := range rep.Findings {
		if f.Kind == reconciler.KindInstanceGone && f.Action != reconciler.ActionSkipped {
			t.Errorf("finding %+v acted on", f)
		}
	}
	for _, inst := range e.insts {
		if _, err := e.st.GetNode(ctx, inst.ID); err != nil {
			t.Errorf("node %s removed: %v", inst.ID, err)
		}
	}
	if n := e.sim.Counters()["DeleteNetworkInterface"].Calls; n != 0 {
		t.Errorf("%d ENIs deleted", n)
	}
}
