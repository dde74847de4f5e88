package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/etcdembed"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// gate holds the first transaction it is armed for until the ops in it and
// those queued behind it number n, so the test knows that many queued
// while one was in flight without relying on how fast anything runs.
type gate struct {
	applier
	b      *batcher
	subnet string

	mu sync.Mutex
	n  int // 0: open
}

func (g *gate) arm(n int) {
	g.mu.Lock()
	g.n = n
	g.mu.Unlock()
}

func (g *gate) Apply(ctx context.Context, ops ...*store.Op) error {
	g.mu.Lock()
	n := g.n
	g.n = 0
	g.mu.Unlock()
	for n > 0 {
		g.b.mu.Lock()
		queued := 0
		if q := g.b.queues[g.subnet]; q != nil {
			queued = len(q.waiting)
		}
		g.b.mu.Unlock()
		if len(ops)+queued >= n {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return g.applier.Apply(ctx, ops...)
}

// newGatedStore returns a serial store on a fresh etcd with node i-1 and
// subnets of the given limits (Usable limit+10, Headroom 10), and the gate
// in front of its transactions on subnet-1.
func newGatedStore(t *testing.T, limits map[string]int64) (*store.Store, *serialStore, *gate) {
	t.Helper()
	st, err := store.Open(etcdembedtest.Start(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for id, limit := range limits {
		if _, err := st.PutSubnet(ctx, store.Subnet{ID: id, Usable: limit + 10, Headroom: 10}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.PutNode(ctx, store.Node{InstanceID: "i-1", InstanceType: "c5.xlarge", SubnetID: "subnet-1"}); err != nil {
		t.Fatal(err)
	}
	ss := newSerialStore(st)
	g := &gate{applier: st, subnet: "subnet-1"}
	ss.batch = newBatcher(g)
	g.b = ss.batch
	return st, ss, g
}

// each runs f(i) for i in [0, n) at once and returns the errors by i.
func each(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errs
}

func subnetTxns(st *store.Store) int64 {
	w := st.Writes()
	return w["IntentBatch"] + w["BeginIntent"] + w["CompleteCreate"] + w["FailIntent"]
}

// TestBatchedIntentsOnOneSubnet: many workers reserving from and then
// completing on one subnet at once share transactions, and the subnet's
// counters come out exact: the reservations that fit commit, the rest are
// refused one by one, and every completion moves exactly its addresses.
// The engine's write mark reaches the revision of every batched write.
func TestBatchedIntentsOnOneSubnet(t *testing.T) {
	st, ss, g := newGatedStore(t, map[string]int64{"subnet-1": 100})
	var mark store.WriteMark
	ctx, cancel := context.WithTimeout(store.WithWriteMark(context.Background(), &mark), time.Minute)
	defer cancel()

	const workers, each2 = 64, 2 // 50 reservations of 2 fit a limit of 100
	g.arm(workers)
	got := make([]store.Intent, workers)
	errs := each(workers, func(i int) error {
		var err error
		got[i], err = ss.BeginIntent(ctx, store.Intent{Kind: store.IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: each2, ClientToken: fmt.Sprintf("tok-%d", i)})
		return err
	})
	var begun []store.Intent
	for i, err := range errs {
		var be *rpcerr.BudgetError
		switch {
		case err == nil:
			begun = append(begun, got[i])
			if got[i].Rev == 0 || got[i].Rev > mark.Rev() {
				t.Errorf("intent %s at revision %d, write mark %d", got[i].ID, got[i].Rev, mark.Rev())
			}
		case !errors.As(err, &be):
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	if len(begun) != 50 {
		t.Fatalf("%d reservations of %d committed within a limit of 100, want 50", len(begun), each2)
	}
	// The first transaction carried at least one op; the other 63 at
	// most, MaxBatch at a time.
	if n, most := subnetTxns(st), 1+(workers-1+store.MaxBatch-1)/store.MaxBatch; n > int64(most) {
		t.Errorf("%d ops in %d transactions, want at most %d", workers, n, most)
	}
	wantSubnet(t, st, 0, 100)
	if n := len(ss.OpenIntents()); n != 50 {
		t.Errorf("%d intents mirrored open, want 50", n)
	}

	before := subnetTxns(st)
	g.arm(len(begun))
	errs = each(len(begun), func(i int) error {
		eni := store.ENI{ID: fmt.Sprintf("eni-%d", i), PrimaryIP: fmt.Sprintf("10.0.1.%d", i), Addresses: []string{fmt.Sprintf("10.0.2.%d", i)}}
		if i%5 == 0 {
			return ss.FailIntent(ctx, begun[i].ID, errors.New("refused"))
		}
		return ss.CompleteCreate(ctx, begun[i].ID, eni)
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("closing %s: %v", begun[i].ID, err)
		}
	}
	if n := subnetTxns(st) - before; n >= int64(len(begun)) {
		t.Errorf("%d completions in %d transactions, want fewer", len(begun), n)
	}
	// 40 ENIs of weight 2 attached, 10 reservations returned.
	wantSubnet(t, st, 80, 0)
	if n := len(ss.OpenIntents()); n != 0 {
		t.Errorf("%d intents mirrored open, want none", n)
	}
	if rev, err := st.Revision(ctx); err != nil || mark.Rev() != rev {
		t.Errorf("write mark %d, etcd at %d (%v): the last write was the engine's", mark.Rev(), rev, err)
	}
}

func wantSubnet(t *testing.T, st *store.Store, attached, reserved int64) {
	t.Helper()
	sn, err := st.GetSubnet(context.Background(), "subnet-1")
	if err != nil {
		t.Fatal(err)
	}
	if sn.Attached != attached || sn.Reserved != reserved {
		t.Errorf("subnet-1 attached %d reserved %d, want %d and %d", sn.Attached, sn.Reserved, attached, reserved)
	}
}

// TestBatchCorruptSubnetStaysItsOwn: a subnet whose record does not decode
// refuses its own queue's ops; another subnet's, queued at the same time,
// commit.
func TestBatchCorruptSubnetStaysItsOwn(t *testing.T) {
	st, ss, _ := newGatedStore(t, map[string]int64{"subnet-1": 100, "subnet-2": 100})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := st.Client().Put(ctx, st.Prefix()+"subnets/subnet-2", "garbage"); err != nil {
		t.Fatal(err)
	}
	errs := each(40, func(i int) error {
		_, err := ss.BeginIntent(ctx, store.Intent{Kind: store.IntentCreate, InstanceID: "i-1", SubnetID: fmt.Sprintf("subnet-%d", 1+i%2), Reserved: 1})
		return err
	})
	for i, err := range errs {
		if i%2 == 0 && err != nil {
			t.Errorf("op %d on the healthy subnet: %v", i, err)
		}
		if i%2 == 1 && !errors.Is(err, rpcerr.ErrCorrupt) {
			t.Errorf("op %d on the corrupt subnet: %v, want ErrCorrupt", i, err)
		}
	}
	wantSubnet(t, st, 0, 20)
}

// TestBatchCallerGivesUp: an op whose caller gave up while it waited is
// dropped, and its neighbours commit.
func TestBatchCallerGivesUp(t *testing.T) {
	st, ss, g := newGatedStore(t, map[string]int64{"subnet-1": 100})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g.arm(3) // the first op and the two behind it
	first := make(chan error)
	go func() {
		_, err := ss.BeginIntent(ctx, store.Intent{ID: "int-first", Kind: store.IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 1})
		first <- err
	}()
	// Wait until the first is in flight (held by the gate).
	for {
		ss.batch.mu.Lock()
		q := ss.batch.queues["subnet-1"]
		inFlight := q != nil && len(q.waiting) == 0
		ss.batch.mu.Unlock()
		if inFlight {
			break
		}
		time.Sleep(time.Millisecond)
	}
	gone, giveUp := context.WithCancel(ctx)
	goneErr := make(chan error)
	go func() {
		_, err := ss.BeginIntent(gone, store.Intent{ID: "int-gone", Kind: store.IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 1})
		goneErr <- err
	}()
	for {
		ss.batch.mu.Lock()
		n := len(ss.batch.queues["subnet-1"].waiting)
		ss.batch.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	giveUp()
	if err := <-goneErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the op given up: %v", err)
	}
	if _, err := ss.BeginIntent(ctx, store.Intent{ID: "int-last", Kind: store.IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 1}); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetIntent(ctx, "int-gone"); !errors.Is(err, rpcerr.ErrNotFound) {
		t.Errorf("intent given up: %v, want never written", err)
	}
	wantSubnet(t, st, 0, 2)
}

// BenchmarkReservationsOnOneSubnet: 60 workers begin a reserving intent on
// one subnet at once, etcd fsyncing as in production: one write at a time
// (a lock per subnet in front of the store, as the engine did before its
// queue) against the queue. ns/op is the time until all 60 are recorded;
// txns/op the etcd transactions they took.
func BenchmarkReservationsOnOneSubnet(b *testing.B) {
	ctx := context.Background()
	srv, err := etcdembed.Start(ctx, etcdembed.Config{Dir: b.TempDir(), HeartbeatInterval: 10 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	cli, err := srv.Client()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	st, err := store.Open(cli, "bench")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.PutSubnet(ctx, store.Subnet{ID: "subnet-1", Usable: 1 << 40}); err != nil {
		b.Fatal(err)
	}
	if _, err := st.PutNode(ctx, store.Node{InstanceID: "i-1", InstanceType: "c5.xlarge", SubnetID: "subnet-1"}); err != nil {
		b.Fatal(err)
	}
	in := store.Intent{Kind: store.IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 16}
	var lock sync.Mutex
	oneAtATime := func() error {
		lock.Lock()
		defer lock.Unlock()
		_, err := st.BeginIntent(ctx, in)
		return err
	}
	ss := newSerialStore(st)
	queued := func() error {
		_, err := ss.BeginIntent(ctx, in)
		return err
	}
	for _, c := range []struct {
		name  string
		begin func() error
	}{{"one-at-a-time", oneAtATime}, {"queued", queued}} {
		b.Run(c.name, func(b *testing.B) {
			before := subnetTxns(st)
			for b.Loop() {
				for _, err := range each(60, func(int) error { return c.begin() }) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(subnetTxns(st)-before)/float64(b.N), "txns/op")
		})
	}
}
