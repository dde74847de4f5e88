package store

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// newBudgetStore returns a store with node i-1 and subnet-1 whose limit is
// limit (Usable limit+10, Headroom 10).
func newBudgetStore(t *testing.T, limit int64) *Store {
	t.Helper()
	s := newStore(t)
	ctx := ctxT(t)
	if _, err := s.PutSubnet(ctx, Subnet{ID: "subnet-1", Usable: limit + 10, Headroom: 10}); err != nil {
		t.Fatal(err)
	}
	mustNode(t, s, "i-1")
	return s
}

func TestBudgetRefusalLeavesNothing(t *testing.T) {
	s := newBudgetStore(t, 20)
	ctx := ctxT(t)
	ok, err := s.BeginIntent(ctx, Intent{Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 15})
	if err != nil {
		t.Fatal(err)
	}
	before, err := s.GetSubnet(ctx, "subnet-1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.BeginIntent(ctx, Intent{ID: "int-refused", Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 6})
	var be *rpcerr.BudgetError
	if !errors.As(err, &be) || !errors.Is(err, rpcerr.ErrBudgetExceeded) {
		t.Fatalf("got %v, want *rpcerr.BudgetError wrapping rpcerr.ErrBudgetExceeded", err)
	}
	if *be != (rpcerr.BudgetError{SubnetID: "subnet-1", Limit: 20, Use: 15, Requested: 6}) {
		t.Errorf("rpcerr.BudgetError = %+v", *be)
	}
	if want := "subnet subnet-1: budget exceeded: limit 20, in use 15, requested 6"; err.Error() != want {
		t.Errorf("error text %q, want %q", err, want)
	}
	after, err := s.GetSubnet(ctx, "subnet-1")
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("subnet changed by a refused intent: %+v -> %+v", before, after)
	}
	_, err = s.GetIntent(ctx, "int-refused")
	wantErr(t, err, rpcerr.ErrNotFound)
	open, err := s.ListOpenIntents(ctx)
	if err != nil || len(open) != 1 || open[0].ID != ok.ID {
		t.Fatalf("open intents %+v, %v; want only %s", open, err, ok.ID)
	}
	// Exactly what remains still fits.
	if _, err := s.BeginIntent(ctx, Intent{Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 5}); err != nil {
		t.Fatalf("reserving the last 5 of 20: %v", err)
	}
	checkLedger(t, s)
}

func TestBeginIntentValidation(t *testing.T) {
	s := newBudgetStore(t, 20)
	ctx := ctxT(t)
	for name, in := range map[string]Intent{
		"unknown kind":        {Kind: "explode", InstanceID: "i-1"},
		"no instance":         {Kind: IntentCreate},
		"attach without eni":  {Kind: IntentAttach, InstanceID: "i-1"},
		"negative reserve":    {Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: -1},
		"reserve w/o subnet":  {Kind: IntentCreate, InstanceID: "i-1", Reserved: 1},
		"bad address":         {Kind: IntentCreate, InstanceID: "i-1", Addresses: []string{"x"}},
		"unassign no release": {Kind: IntentUnassign, InstanceID: "i-1", ENIID: "eni-1", Addresses: []string{"10.0.0.1"}},
		"unassign nothing":    {Kind: IntentUnassign, InstanceID: "i-1", ENIID: "eni-1", ReleaseID: "rel-1"},
		"bad id":              {ID: "a/b", Kind: IntentCreate, InstanceID: "i-1"},
	} {
		if _, err := s.BeginIntent(ctx, in); !errors.Is(err, rpcerr.ErrInvalid) {
			t.Errorf("%s: got %v, want rpcerr.ErrInvalid", name, err)
		}
	}
	_, err := s.BeginIntent(ctx, Intent{Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-9", Reserved: 1})
	wantErr(t, err, rpcerr.ErrNotFound)
	_, err = s.BeginIntent(ctx, Intent{Kind: IntentAttach, InstanceID: "i-1", ENIID: "eni-9"})
	wantErr(t, err, rpcerr.ErrNotFound)
	if open, _ := s.ListOpenIntents(ctx); len(open) != 0 {
		t.Fatalf("refused intents were written: %+v", open)
	}
}

func TestBeginIntentSameIDOnce(t *testing.T) {
	s := newBudgetStore(t, 20)
	ctx := ctxT(t)
	in := Intent{ID: "int-fixed", Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 4, ClientToken: "tok"}
	a, err := s.BeginIntent(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.BeginIntent(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != b.ID || !a.CreatedAt.Equal(b.CreatedAt) || a.State != IntentOpen {
		t.Errorf("retried begin %+v differs from first %+v", b, a)
	}
	sn, _ := s.GetSubnet(ctx, "subnet-1")
	if sn.Reserved != 4 {
		t.Errorf("reserved %d after a retried begin, want 4", sn.Reserved)
	}
	in.Reserved = 5
	_, err = s.BeginIntent(ctx, in)
	wantErr(t, err, rpcerr.ErrInvalid)
}

// Fifty goroutines on two brokers (two clients, two Stores) race for a
// budget that fits twenty: exactly twenty win, the rest get a rpcerr.BudgetError,
// and the counters match the intents.
func TestConcurrentBeginNeverOvercommits(t *testing.T) {
	srv := etcdembedtest.StartServer(t)
	var stores []*Store
	for i := 0; i < 2; i++ {
		cli, err := srv.Client()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		s, err := Open(cli, "test")
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	ctx := ctxT(t)
	s := stores[0]
	if _, err := s.PutSubnet(ctx, Subnet{ID: "subnet-1", Usable: 30, Headroom: 10}); err != nil {
		t.Fatal(err)
	}
	mustNode(t, s, "i-1")

	const racers = 50
	var wg sync.WaitGroup
	errs := make([]error, racers)
	start := make(chan struct{})
	for i := 0; i < racers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = stores[i%2].BeginIntent(ctx, Intent{Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 1})
		}()
	}
	close(start)
	wg.Wait()
	won, refused := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, rpcerr.ErrBudgetExceeded):
			refused++
		default:
			t.Errorf("racer %d: %v", i, err)
		}
	}
	if won != 20 || refused != 30 {
		t.Errorf("%d won and %d were refused; want 20 and 30", won, refused)
	}
	sn, err := s.GetSubnet(ctx, "subnet-1")
	if err != nil {
		t.Fatal(err)
	}
	if sn.Reserved != 20 || sn.Available() != 0 {
		t.Errorf("subnet after race: reserved %d available %d, want 20 and 0", sn.Reserved, sn.Available())
	}
	checkLedger(t, s)
}

func TestPruneIntents(t *testing.T) {
	s := newBudgetStore(t, 100)
	ctx := ctxT(t)
	createENI(t, s, "eni-1", "i-1")
	failed, err := s.BeginIntent(ctx, Intent{Kind: IntentModify, InstanceID: "i-1", ENIID: "eni-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.FailIntent(ctx, failed.ID, nil); err != nil {
		t.Fatal(err)
	}
	open, err := s.BeginIntent(ctx, Intent{Kind: IntentModify, InstanceID: "i-1", ENIID: "eni-1"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneIntents(ctx, open.CreatedAt.Add(-time.Hour))
	if err != nil || n != 0 {
		t.Fatalf("pruning before anything finished: %d, %v", n, err)
	}
	n, err = s.PruneIntents(ctx, time.Now().Add(time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("PruneIntents = %d, %v; want the done create and the failed modify", n, err)
	}
	all, err := s.ListIntents(ctx)
	if err != nil || len(all) != 1 || all[0].ID != open.ID {
		t.Fatalf("left %+v, %v; want only the open intent", all, err)
	}
}

// TestOpenIntentsReadAPageAtATime checks the paged read of open intents:
// every open one, none finished, oldest first, and as of the revision
// asked for, across pages.
func TestOpenIntentsReadAPageAtATime(t *testing.T) {
	s := newBudgetStore(t, 1000)
	ctx := ctxT(t)
	was := intentPage
	intentPage = 3
	t.Cleanup(func() { intentPage = was })
	var want []string
	for i := range 10 {
		in, err := s.BeginIntent(ctx, Intent{ID: fmt.Sprintf("int-%02d", 9-i), Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 1})
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 1 {
			if err := s.FailIntent(ctx, in.ID, errors.New("test")); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want = append(want, in.ID)
	}
	ids := func(l []Intent) []string {
		var out []string
		for _, in := range l {
			out = append(out, in.ID)
		}
		return out
	}
	open, err := s.ListOpenIntents(ctx)
	if err != nil || !slices.Equal(ids(open), want) {
		t.Fatalf("open intents %v, %v; want %v (oldest first, finished ones left out)", ids(open), err, want)
	}
	rec, err := s.ReadReconcile(ctx)
	if err != nil || !slices.Equal(ids(rec.Open), want) {
		t.Fatalf("reconciler's open intents %v, %v; want %v", ids(rec.Open), err, want)
	}
	if _, err := s.BeginIntent(ctx, Intent{ID: "int-late", Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 1}); err != nil {
		t.Fatal(err)
	}
	then, _, err := s.openIntents(ctx, rec.Rev)
	if err != nil || !slices.Equal(ids(then), want) {
		t.Errorf("open intents as of revision %d: %v, %v; want %v", rec.Rev, ids(then), err, want)
	}
	if now, _ := s.ListOpenIntents(ctx); len(now) != len(want)+1 {
		t.Errorf("open intents now: %v, want the late one too", ids(now))
	}
}
