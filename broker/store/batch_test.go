package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

func create(id string, reserved int64) Intent {
	return Intent{ID: id, Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: reserved}
}

// same reports whether two intents are the same record at the same revision.
func same(a, b Intent) bool {
	return a.ID == b.ID && a.Rev == b.Rev && a.CreatedAt.Equal(b.CreatedAt) && a.Reserved == b.Reserved
}

// TestBatchOpsSeeEachOther: ops in one transaction decide on what the ones
// before them wrote. Two reservations that together exceed the budget:
// the first commits, the second is refused with its own BudgetError, and
// the batch's other ops commit all the same.
func TestBatchOpsSeeEachOther(t *testing.T) {
	s := newBudgetStore(t, 20)
	ctx := ctxT(t)
	first, over, last := BeginOp(create("int-a", 15)), BeginOp(create("int-b", 6)), BeginOp(create("int-c", 5))
	if err := s.Apply(ctx, first, over, last); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if first.Err() != nil || last.Err() != nil {
		t.Fatalf("ops that fit: %v, %v", first.Err(), last.Err())
	}
	var be *rpcerr.BudgetError
	if !errors.As(over.Err(), &be) || *be != (rpcerr.BudgetError{SubnetID: "subnet-1", Limit: 20, Use: 15, Requested: 6}) {
		t.Fatalf("second reservation: %v, want the BudgetError of 6 on top of 15 of 20", over.Err())
	}
	if got := s.Writes()["IntentBatch"]; got != 1 {
		t.Errorf("%d batch transactions, want 1", got)
	}
	a, c := first.Intent(), last.Intent()
	if a.Rev == 0 || a.Rev != c.Rev || a.State != IntentOpen {
		t.Errorf("intents %+v and %+v: want both open, committed at one revision", a, c)
	}
	if got := over.Intent(); got.ID != "" {
		t.Errorf("refused op's intent %+v, want none", got)
	}
	_, err := s.GetIntent(ctx, "int-b")
	wantErr(t, err, rpcerr.ErrNotFound)
	wantCounters(t, s, 0, 20)

	// A failure returns its reservation to the ops after it, not before.
	early := BeginOp(create("int-d", 5))
	fail := FailOp("int-c", errors.New("refused"))
	late := BeginOp(create("int-e", 5))
	if err := s.Apply(ctx, early, fail, late); err != nil {
		t.Fatal(err)
	}
	if !errors.As(early.Err(), &be) || fail.Err() != nil || late.Err() != nil {
		t.Fatalf("before the failure %v, the failure %v, after it %v; want only the first refused", early.Err(), fail.Err(), late.Err())
	}
	wantCounters(t, s, 0, 20)
	done := CompleteCreateOp("int-a", ENI{ID: "eni-a", PrimaryIP: "10.0.0.10", Addresses: []string{"10.0.0.11"}})
	if err := s.Apply(ctx, done); err != nil || done.Err() != nil {
		t.Fatalf("complete: %v, %v", err, done.Err())
	}
	// int-a attached 2 (the ENI's own address and one secondary), int-e
	// holds 5.
	wantCounters(t, s, 2, 5)
}

// TestBatchIdempotentBegin: a retried BeginIntent, in the same batch or a
// later one, returns the recorded intent and reserves nothing twice; one
// that reuses the ID for another call is refused alone.
func TestBatchIdempotentBegin(t *testing.T) {
	s := newBudgetStore(t, 20)
	ctx := ctxT(t)
	a1, a2 := BeginOp(create("int-a", 4)), BeginOp(create("int-a", 4))
	other := BeginOp(create("int-a", 7))
	b := BeginOp(create("int-b", 3))
	if err := s.Apply(ctx, a1, other, a2, b); err != nil {
		t.Fatal(err)
	}
	if a1.Err() != nil || a2.Err() != nil || b.Err() != nil {
		t.Fatalf("errors %v, %v, %v", a1.Err(), a2.Err(), b.Err())
	}
	wantErr(t, other.Err(), rpcerr.ErrInvalid)
	if !same(a1.Intent(), a2.Intent()) || a1.Intent().Rev == 0 {
		t.Errorf("retry in the same batch got %+v, first %+v", a2.Intent(), a1.Intent())
	}
	wantCounters(t, s, 0, 7)

	before := s.Writes()["IntentBatch"] + s.Writes()["BeginIntent"]
	retry, c := BeginOp(create("int-a", 4)), BeginOp(create("int-a", 4))
	if err := s.Apply(ctx, retry, c); err != nil || retry.Err() != nil || c.Err() != nil {
		t.Fatalf("retry: %v, %v, %v", err, retry.Err(), c.Err())
	}
	if !same(retry.Intent(), a1.Intent()) {
		t.Errorf("retry returned %+v, want the recorded %+v", retry.Intent(), a1.Intent())
	}
	if after := s.Writes()["IntentBatch"] + s.Writes()["BeginIntent"]; after != before {
		t.Errorf("a batch of retries wrote (%d transactions, want %d)", after, before)
	}
	wantCounters(t, s, 0, 7)
}

// TestBatchFenced: a batch carrying the fence of a deposed leader fails
// every op with ErrNotLeader and writes nothing.
func TestBatchFenced(t *testing.T) {
	s := newBudgetStore(t, 100)
	ctx := ctxT(t)
	if _, err := s.BeginIntent(ctx, create("int-old", 3)); err != nil {
		t.Fatal(err)
	}
	key := s.ElectionPrefix() + "/694d"
	put, err := s.Client().Put(ctx, key, "a")
	if err != nil {
		t.Fatal(err)
	}
	fenced := WithFence(ctx, key, put.Header.Revision)
	if _, err := s.Client().Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	before := subnetOf(t, s)
	ops := []*Op{BeginOp(create("int-1", 2)), FailOp("int-old", errors.New("x")), BeginOp(create("int-2", 200))}
	err = s.Apply(fenced, ops...)
	wantErr(t, err, rpcerr.ErrNotLeader)
	for i, op := range ops {
		wantErr(t, op.Err(), rpcerr.ErrNotLeader)
		if op.Intent().ID != "" {
			t.Errorf("op %d returned an intent though refused", i)
		}
	}
	if after := subnetOf(t, s); after != before {
		t.Errorf("subnet changed by a fenced batch: %+v -> %+v", before, after)
	}
	for _, id := range []string{"int-1", "int-2"} {
		_, err := s.GetIntent(ctx, id)
		wantErr(t, err, rpcerr.ErrNotFound)
	}
	if in, err := s.GetIntent(ctx, "int-old"); err != nil || in.State != IntentOpen {
		t.Errorf("int-old %+v, %v: want still open", in, err)
	}
}

// TestBatchCorruptSubnet: a subnet record that does not decode refuses the
// ops on that subnet; the ops on other subnets in the same batch commit.
func TestBatchCorruptSubnet(t *testing.T) {
	s := newBudgetStore(t, 100)
	ctx := ctxT(t)
	mustSubnet(t, s, "subnet-2", 50)
	key := s.Prefix() + "subnets/subnet-2"
	if _, err := s.Client().Put(ctx, key, `{"v":1,"id":"subnet-2","usable":`); err != nil {
		t.Fatal(err)
	}
	on2 := Intent{ID: "int-2", Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-2", Reserved: 1}
	a, bad, b := BeginOp(create("int-a", 2)), BeginOp(on2), BeginOp(create("int-b", 3))
	if err := s.Apply(ctx, a, bad, b); err != nil {
		t.Fatal(err)
	}
	wantErr(t, bad.Err(), rpcerr.ErrCorrupt)
	if a.Err() != nil || b.Err() != nil {
		t.Fatalf("ops on the healthy subnet: %v, %v", a.Err(), b.Err())
	}
	if resp, err := s.Client().Get(ctx, key); err != nil || string(resp.Kvs[0].Value) != `{"v":1,"id":"subnet-2","usable":` {
		t.Errorf("corrupt record was overwritten")
	}
	_, err := s.GetIntent(ctx, "int-2")
	wantErr(t, err, rpcerr.ErrNotFound)
	if sn := subnetOf(t, s); sn.Reserved != 5 {
		t.Errorf("subnet-1 reserved %d, want 5", sn.Reserved)
	}
}

// TestBatchSplitsAndRetries: more ops than one transaction may hold commit
// in several, and batches racing on one subnet (no queue in front of the
// store) lose compares, re-decide on fresh records and still add up.
func TestBatchSplitsAndRetries(t *testing.T) {
	s := newBudgetStore(t, 1000)
	ctx := ctxT(t)
	ops := make([]*Op, 2*MaxBatch+5)
	for i := range ops {
		ops[i] = BeginOp(create(fmt.Sprintf("int-s%d", i), 1))
	}
	if err := s.Apply(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	if got := s.Writes()["IntentBatch"]; got != 3 {
		t.Errorf("%d ops in %d transactions, want 3", len(ops), got)
	}
	wantCounters(t, s, 0, int64(len(ops)))

	const racers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, racers*each)
	for r := range racers {
		wg.Go(func() {
			batch := make([]*Op, each)
			for i := range batch {
				batch[i] = BeginOp(create(fmt.Sprintf("int-r%d-%d", r, i), 3))
			}
			if err := s.Apply(ctx, batch...); err != nil {
				errs <- err
			}
			for _, op := range batch {
				if op.Err() != nil {
					errs <- op.Err()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	wantCounters(t, s, 0, int64(len(ops))+racers*each*3)
}
