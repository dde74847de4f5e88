package store

import (
	"errors"
	"fmt"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"sync"
	"testing"
)

func subnetOf(t *testing.T, s *Store) Subnet {
	t.Helper()
	sn, err := s.GetSubnet(ctxT(t), "subnet-1")
	if err != nil {
		t.Fatal(err)
	}
	return sn
}

func wantCounters(t *testing.T, s *Store, attached, reserved int64) {
	t.Helper()
	sn := subnetOf(t, s)
	if sn.Attached != attached || sn.Reserved != reserved {
		t.Fatalf("subnet attached %d reserved %d, want %d and %d", sn.Attached, sn.Reserved, attached, reserved)
	}
	checkLedger(t, s)
}

// createENI runs a create intent to completion: eni-1 on i-1 with two
// secondary addresses (weight 3).
func createENI(t *testing.T, s *Store, id, instance string, addrs ...string) {
	t.Helper()
	ctx := ctxT(t)
	in, err := s.BeginIntent(ctx, Intent{Kind: IntentCreate, InstanceID: instance, SubnetID: "subnet-1", Reserved: int64(1 + len(addrs)), ClientToken: "tok-" + id})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteCreate(ctx, in.ID, ENI{ID: id, PrimaryIP: "10.0.0.250", Addresses: addrs}); err != nil {
		t.Fatal(err)
	}
}

func TestIntentLifecycle(t *testing.T) {
	s := newBudgetStore(t, 100)
	ctx := ctxT(t)

	create, err := s.BeginIntent(ctx, Intent{Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Count: 2, Reserved: 3, ClientToken: "tok-1"})
	if err != nil {
		t.Fatal(err)
	}
	if create.ID == "" || create.State != IntentOpen || create.CreatedAt.IsZero() || create.Rev == 0 {
		t.Fatalf("BeginIntent = %+v: want ID, open, CreatedAt, Rev", create)
	}
	wantCounters(t, s, 0, 3)
	if err := s.CompleteCreate(ctx, create.ID, ENI{ID: "eni-1", PrimaryIP: "10.0.0.10", Addresses: []string{"10.0.0.12", "10.0.0.11"}}); err != nil {
		t.Fatal(err)
	}
	wantCounters(t, s, 3, 0)
	e, err := s.GetENI(ctx, "eni-1")
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != ENICreated || e.InstanceID != "i-1" || e.SubnetID != "subnet-1" || e.ClientToken != "tok-1" || e.Primary {
		t.Fatalf("created ENI %+v: want created, i-1, subnet-1, token from the intent", e)
	}
	if got, _ := s.GetIntent(ctx, create.ID); got.State != IntentDone || got.ENIID != "eni-1" || got.FinishedAt.IsZero() {
		t.Fatalf("create intent after completion: %+v", got)
	}

	attach, err := s.BeginIntent(ctx, Intent{Kind: IntentAttach, InstanceID: "i-1", ENIID: "eni-1", DeviceIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteAttach(ctx, attach.ID, "eni-1", 1); err != nil {
		t.Fatal(err)
	}
	modify, err := s.BeginIntent(ctx, Intent{Kind: IntentModify, InstanceID: "i-1", ENIID: "eni-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteModify(ctx, modify.ID); err != nil {
		t.Fatal(err)
	}
	if e, _ = s.GetENI(ctx, "eni-1"); e.Status != ENIAttached || e.DeviceIndex != 1 {
		t.Fatalf("after attach %+v", e)
	}

	// Assign reserves 4 but EC2 gives 3 addresses and one prefix: 3+16
	// attached; the reservation returns whole.
	if _, err := s.SetSubnetBudget(ctx, "subnet-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	assign, err := s.BeginIntent(ctx, Intent{Kind: IntentAssign, InstanceID: "i-1", ENIID: "eni-1", SubnetID: "subnet-1", Count: 4, Reserved: 4})
	if err != nil {
		t.Fatal(err)
	}
	wantCounters(t, s, 3, 4)
	if err := s.CompleteAssign(ctx, assign.ID, "eni-1", []string{"10.0.0.13", "10.0.0.14", "10.0.0.11"}, []string{"10.0.1.16/28"}); err != nil {
		t.Fatal(err)
	}
	wantCounters(t, s, 3+2+16, 0) // 10.0.0.11 was already there
	if e, _ = s.GetENI(ctx, "eni-1"); len(e.Addresses) != 4 || len(e.Prefixes) != 1 {
		t.Fatalf("after assign %+v", e)
	}

	nodeENIs, err := s.ListNodeENIs(ctx, "i-1")
	if err != nil || len(nodeENIs) != 1 {
		t.Fatalf("ListNodeENIs = %+v, %v", nodeENIs, err)
	}

	detach, err := s.BeginIntent(ctx, Intent{Kind: IntentDetach, InstanceID: "i-1", ENIID: "eni-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteDetach(ctx, detach.ID, "eni-1"); err != nil {
		t.Fatal(err)
	}
	if e, _ = s.GetENI(ctx, "eni-1"); e.Status != ENIDetached {
		t.Fatalf("after detach %+v", e)
	}
	del, err := s.BeginIntent(ctx, Intent{Kind: IntentDelete, InstanceID: "i-1", ENIID: "eni-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteDelete(ctx, del.ID, "eni-1"); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetENI(ctx, "eni-1")
	wantErr(t, err, rpcerr.ErrNotFound)
	wantCounters(t, s, 0, 0)
	if open, _ := s.ListOpenIntents(ctx); len(open) != 0 {
		t.Fatalf("open intents left: %+v", open)
	}
}

func TestCompleteIdempotent(t *testing.T) {
	s := newBudgetStore(t, 100)
	ctx := ctxT(t)
	in, err := s.BeginIntent(ctx, Intent{Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 3})
	if err != nil {
		t.Fatal(err)
	}
	eni := ENI{ID: "eni-1", Addresses: []string{"10.0.0.11", "10.0.0.12"}}
	for i := 0; i < 3; i++ {
		if err := s.CompleteCreate(ctx, in.ID, eni); err != nil {
			t.Fatalf("completion %d: %v", i, err)
		}
	}
	wantCounters(t, s, 3, 0)
	if w := s.Writes()["CompleteCreate"]; w != 1 {
		t.Errorf("%d CompleteCreate writes, want 1 (repeats are no-ops)", w)
	}
	wantErr(t, s.FailIntent(ctx, in.ID, errors.New("late")), rpcerr.ErrWrongState)

	assign, err := s.BeginIntent(ctx, Intent{Kind: IntentAssign, InstanceID: "i-1", ENIID: "eni-1", SubnetID: "subnet-1", Reserved: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := s.CompleteAssign(ctx, assign.ID, "eni-1", []string{"10.0.0.13", "10.0.0.14"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	wantCounters(t, s, 5, 0)

	// A failed intent returns its reservation once, however often it fails,
	// and cannot be completed afterwards.
	failed, err := s.BeginIntent(ctx, Intent{Kind: IntentAssign, InstanceID: "i-1", ENIID: "eni-1", SubnetID: "subnet-1", Reserved: 7})
	if err != nil {
		t.Fatal(err)
	}
	wantCounters(t, s, 5, 7)
	for i := 0; i < 2; i++ {
		if err := s.FailIntent(ctx, failed.ID, errors.New("InsufficientFreeAddressesInSubnet")); err != nil {
			t.Fatal(err)
		}
	}
	wantCounters(t, s, 5, 0)
	got, _ := s.GetIntent(ctx, failed.ID)
	if got.State != IntentFailed || got.Error != "InsufficientFreeAddressesInSubnet" {
		t.Errorf("failed intent %+v", got)
	}
	wantErr(t, s.CompleteAssign(ctx, failed.ID, "eni-1", []string{"10.0.0.20"}, nil), rpcerr.ErrWrongState)
	wantCounters(t, s, 5, 0)
}

func TestCompleteChecks(t *testing.T) {
	s := newBudgetStore(t, 100)
	ctx := ctxT(t)
	mustNode(t, s, "i-2")
	createENI(t, s, "eni-1", "i-1", "10.0.0.11")
	createENI(t, s, "eni-2", "i-2", "10.0.0.21")
	before := subnetOf(t, s)

	wantErr(t, s.CompleteModify(ctx, "int-missing"), rpcerr.ErrNotFound)
	assign, err := s.BeginIntent(ctx, Intent{Kind: IntentAssign, InstanceID: "i-1", ENIID: "eni-1", SubnetID: "subnet-1", Reserved: 1})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.CompleteAttach(ctx, assign.ID, "eni-1", 1), rpcerr.ErrInvalid)                          // wrong kind
	wantErr(t, s.CompleteAssign(ctx, assign.ID, "eni-2", []string{"10.0.0.30"}, nil), rpcerr.ErrInvalid) // not the intent's ENI
	wantErr(t, s.CompleteAssign(ctx, assign.ID, "eni-1", []string{"bogus"}, nil), rpcerr.ErrInvalid)
	wantErr(t, s.CompleteAssign(ctx, assign.ID, "eni-1", nil, []string{"10.0.0.0/24"}), rpcerr.ErrInvalid)

	// A node cannot act on another node's ENI.
	_, err = s.BeginIntent(ctx, Intent{Kind: IntentAssign, InstanceID: "i-1", ENIID: "eni-2", SubnetID: "subnet-1", Reserved: 1})
	wantErr(t, err, rpcerr.ErrNotOwner)
	_, err = s.BeginIntent(ctx, Intent{Kind: IntentDelete, InstanceID: "i-1", ENIID: "eni-2"})
	wantErr(t, err, rpcerr.ErrNotOwner)
	create, err := s.BeginIntent(ctx, Intent{Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 1})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.CompleteCreate(ctx, create.ID, ENI{ID: "eni-3", InstanceID: "i-2"}), rpcerr.ErrNotOwner)
	wantErr(t, s.CompleteCreate(ctx, create.ID, ENI{ID: "eni-2"}), rpcerr.ErrNotOwner) // eni-2 is i-2's
	wantErr(t, s.CompleteCreate(ctx, create.ID, ENI{ID: "eni-3", SubnetID: "subnet-2"}), rpcerr.ErrInvalid)

	// None of the refusals changed anything.
	after := subnetOf(t, s)
	if after.Attached != before.Attached || after.Reserved != before.Reserved+2 {
		t.Fatalf("subnet %+v after refusals, before %+v (+2 reserved by the two open intents)", after, before)
	}
	if e, _ := s.GetENI(ctx, "eni-2"); e.InstanceID != "i-2" || len(e.Addresses) != 1 {
		t.Fatalf("eni-2 changed: %+v", e)
	}
	checkLedger(t, s)

	// Detach and delete of an ENI without a record (a collected leak) only
	// close the intent.
	del, err := s.BeginIntent(ctx, Intent{Kind: IntentDelete, InstanceID: "i-1", ENIID: "eni-leak"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteDelete(ctx, del.ID, "eni-leak"); err != nil {
		t.Fatal(err)
	}
	checkLedger(t, s)
}

func TestPrimaryENI(t *testing.T) {
	s := newBudgetStore(t, 100)
	ctx := ctxT(t)
	mustNode(t, s, "i-2")
	if err := s.PutPrimaryENI(ctx, ENI{ID: "eni-p1", InstanceID: "i-1", SubnetID: "subnet-1", PrimaryIP: "10.0.0.5"}); err != nil {
		t.Fatal(err)
	}
	wantCounters(t, s, 0, 0) // the primary ENI's own address is not ours
	// Addresses present on first registration are counted.
	if err := s.PutPrimaryENI(ctx, ENI{ID: "eni-p2", InstanceID: "i-2", SubnetID: "subnet-1", PrimaryIP: "10.0.0.6", Addresses: []string{"10.0.0.7"}}); err != nil {
		t.Fatal(err)
	}
	wantCounters(t, s, 1, 0)
	// An update does not touch the address lists.
	if err := s.PutPrimaryENI(ctx, ENI{ID: "eni-p2", InstanceID: "i-2", SubnetID: "subnet-1", MAC: "02:00:00:00:00:02", Addresses: []string{"10.0.0.8", "10.0.0.9"}}); err != nil {
		t.Fatal(err)
	}
	e, err := s.GetENI(ctx, "eni-p2")
	if err != nil || !e.Primary || e.MAC != "02:00:00:00:00:02" || len(e.Addresses) != 1 || e.Status != ENIAttached {
		t.Fatalf("primary ENI %+v, %v", e, err)
	}
	wantCounters(t, s, 1, 0)
	wantErr(t, s.PutPrimaryENI(ctx, ENI{ID: "eni-p2", InstanceID: "i-1"}), rpcerr.ErrNotOwner)
	createENI(t, s, "eni-1", "i-1")
	wantErr(t, s.PutPrimaryENI(ctx, ENI{ID: "eni-1", InstanceID: "i-1"}), rpcerr.ErrInvalid)

	// Assigning to a primary ENI counts the new addresses only.
	assign, err := s.BeginIntent(ctx, Intent{Kind: IntentAssign, InstanceID: "i-1", ENIID: "eni-p1", SubnetID: "subnet-1", Reserved: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteAssign(ctx, assign.ID, "eni-p1", []string{"10.0.0.30", "10.0.0.31"}, nil); err != nil {
		t.Fatal(err)
	}
	wantCounters(t, s, 1+1+2, 0)
	enis, err := s.ListNodeENIs(ctx, "i-1")
	if err != nil || len(enis) != 2 || enis[0].ID != "eni-p1" || enis[1].ID != "eni-1" {
		t.Fatalf("ListNodeENIs(i-1) = %+v, %v; want primary first", enis, err)
	}
	all, err := s.ListENIs(ctx)
	if err != nil || len(all) != 3 {
		t.Fatalf("ListENIs = %d, %v", len(all), err)
	}
}

// Many goroutines begin, complete and fail intents on one subnet at once;
// no counter update is lost.
func TestConcurrentCompletionsKeepLedger(t *testing.T) {
	s := newBudgetStore(t, 1000)
	ctx := ctxT(t)
	for i := 0; i < 4; i++ {
		createENI(t, s, fmt.Sprintf("eni-%d", i), "i-1")
	}
	const workers = 24
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			eni := fmt.Sprintf("eni-%d", w%4)
			in, err := s.BeginIntent(ctx, Intent{Kind: IntentAssign, InstanceID: "i-1", ENIID: eni, SubnetID: "subnet-1", Reserved: 2})
			if err != nil {
				errs <- err
				return
			}
			if w%3 == 0 {
				errs <- s.FailIntent(ctx, in.ID, errors.New("refused"))
				return
			}
			errs <- s.CompleteAssign(ctx, in.ID, eni, []string{fmt.Sprintf("10.0.1.%d", w), fmt.Sprintf("10.0.2.%d", w)}, nil)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// 4 ENIs (weight 1 each) + 16 successful assigns of 2.
	wantCounters(t, s, 4+16*2, 0)
}
