package reconciler_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/reconciler"
	"github.com/allotnet/allot/broker/store"
)

// busyStore is the store while the engine works: right after the ENI
// records are read, an ENI is recorded (its record and the subnet's count
// in one transaction, as the engine writes them). It counts the subnet
// corrections asked of it.
type busyStore struct {
	*store.Store
	write       func()
	corrections atomic.Int32
}

func (b *busyStore) ListENIs(ctx context.Context) ([]store.ENI, error) {
	out, err := b.Store.ListENIs(ctx)
	if b.write != nil {
		b.write()
		b.write = nil
	}
	return out, err
}

func (b *busyStore) CorrectSubnet(ctx context.Context, id string, t store.SubnetTruth, observed int64) (store.SubnetCorrection, error) {
	b.corrections.Add(1)
	return b.Store.CorrectSubnet(ctx, id, t, observed)
}

// TestNoSubnetDriftFromAWriteBetweenReads: the records a pass compares
// are read as of one revision, so an ENI the engine records meanwhile is
// not reported as the subnet record drifting from its ENI records, and
// nothing is corrected.
func TestNoSubnetDriftFromAWriteBetweenReads(t *testing.T) {
	e := newEnv(t, 1)
	inst := e.insts[0].ID
	first := e.create(t, ours(inst), 2)
	e.record(t, first, inst, 0)
	e.pass(t) // settles the use by others
	second := e.create(t, ours(inst), 2)
	bs := &busyStore{Store: e.st, write: func() { e.record(t, second, inst, 0) }}
	e.rec = reconciler.New(reconciler.Config{Cluster: cluster, Store: bs, EC2: e.ec2, Grace: grace})
	rep := e.pass(t)
	if n := rep.Count(reconciler.KindSubnetRecord); n != 0 {
		t.Errorf("a write between the pass's reads showed as %d subnet record drifts: %+v", n, rep.Findings)
	}
	e.checkAccounts(t)
}

// TestSubnetUseLeftAloneWhileCallsInFlight: while an open intent reserves
// addresses in a subnet, its use by others is not recomputed (EC2's count
// and ours move until the call ends), and the pass says so without asking
// the store to read every ENI and intent record to find that out.
func TestSubnetUseLeftAloneWhileCallsInFlight(t *testing.T) {
	e := newEnv(t, 1)
	ctx := ctxT(t)
	inst := e.insts[0].ID
	e.create(t, nil, 5) // someone else's ENI: 6 addresses
	if _, err := e.st.BeginIntent(ctx, store.Intent{Kind: store.IntentCreate, InstanceID: inst, SubnetID: subnetID,
		Count: 2, Reserved: 3, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	bs := &busyStore{Store: e.st}
	e.rec = reconciler.New(reconciler.Config{Cluster: cluster, Store: bs, EC2: e.ec2, Grace: grace})
	rep := e.pass(t)
	if a := action(rep, reconciler.KindSubnetUse, subnetID); a != reconciler.ActionSkipped {
		t.Errorf("use by others finding %q, want skipped: %+v", a, rep.Findings)
	}
	if n := bs.corrections.Load(); n != 0 {
		t.Errorf("the pass asked the store for %d subnet corrections, want none while the intent is open", n)
	}
	sn, err := e.st.GetSubnet(ctx, subnetID)
	if err != nil || sn.UsedByOthers != 0 {
		t.Errorf("subnet %+v, %v: want the use by others left at 0", sn, err)
	}
}
