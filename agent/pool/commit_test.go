package pool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/checkpoint"
)

// addResult is what a background ADD returned, and whether the checkpoint
// held its allocation at the moment it returned.
type addResult struct {
	key       Key
	al        Allocation
	err       error
	persisted bool
}

// goAdd runs an ADD of key c in the background.
func goAdd(f fixture, c string, out chan<- addResult) {
	go func() {
		k := key(c)
		al, err := f.p.Add(context.Background(), k, PodInfo{PodName: c})
		last, _ := f.store.state()
		out <- addResult{key: k, al: al, err: err, persisted: holds(last, k, al.Addr)}
	}()
}

// holds reports whether st records k holding addr.
func holds(st checkpoint.State, k Key, addr netip.Addr) bool {
	return slices.ContainsFunc(st.Allocations, func(al checkpoint.Allocation) bool {
		return al.Network == k.Network && al.ContainerID == k.ContainerID && al.IfName == k.IfName && al.Addr == addr
	})
}

// containerIDs lists st's allocations by container ID, in st's order.
func containerIDs(st checkpoint.State) []string {
	var out []string
	for _, al := range st.Allocations {
		out = append(out, al.ContainerID)
	}
	return out
}

func addrRange(prefix string, from, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s.%d", prefix, from+i))
	}
	return out
}

// noSave fails if a Save is waiting at the gate.
func noSave(t *testing.T, g *saveGate, why string) {
	t.Helper()
	select {
	case st := <-g.saving:
		t.Fatalf("unexpected Save (%s) of %d allocations", why, len(st.Allocations))
	default:
	}
}

// recv receives from ch, or fails the test if nothing comes: a regression
// here tends to leave a goroutine stuck, and the test should say so rather
// than hang.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("nothing received in 10s")
	}
	panic("unreachable")
}

func (p *Pool) exclusiveWaiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exclusive
}

// TestGroupCommitSharesWrites: a burst of ADDs on a node shares checkpoint
// writes. While the first write is held, every other ADD takes its address
// in memory and queues; none returns before a write holding its allocation
// completed; the whole queue goes out in one more write.
func TestGroupCommitSharesWrites(t *testing.T) {
	const n = 46
	f := newPool(t, Config{})
	f.capacity(t, "eni-1", addrRange("10.0.1", 20, n)...)
	g := f.store.hold()
	results := make(chan addResult, n)
	for i := range n {
		goAdd(f, fmt.Sprintf("c%d", i), results)
	}
	first := recv(t, g.saving)
	waitFor(t, func() bool { return len(f.p.Allocations()) == n })
	select {
	case r := <-results:
		t.Fatalf("ADD %s returned before any write completed: %+v", r.key, r)
	default:
	}
	// Addresses in flight are assigned: not free, not demanded again.
	if assigned, free := f.p.Usage(); len(assigned) != n || len(free) != 0 {
		t.Fatalf("usage with %d ADDs in flight: %d assigned, %d free", n, len(assigned), len(free))
	}
	if d := f.p.Demand(Targets{WarmIPs: 1}, Limits{MaxENIs: 3, IPv4PerENI: 50}); d.Pending != 0 || d.WarmShortfall != 1 {
		t.Fatalf("demand with %d ADDs in flight: %+v", n, d)
	}
	g.finish <- nil
	second := recv(t, g.saving)
	if len(first.Allocations)+len(second.Allocations) < n || len(second.Allocations) != n {
		t.Fatalf("writes held %d then %d allocations; want the second to hold all %d",
			len(first.Allocations), len(second.Allocations), n)
	}
	g.finish <- nil
	seen := map[netip.Addr]Key{}
	for range n {
		r := recv(t, results)
		if r.err != nil {
			t.Fatalf("ADD %s: %v", r.key, r.err)
		}
		if !r.persisted {
			t.Fatalf("ADD %s returned %s before the checkpoint held it", r.key, r.al.Addr)
		}
		if other, dup := seen[r.al.Addr]; dup {
			t.Fatalf("%s given to %s and %s", r.al.Addr, other, r.key)
		}
		seen[r.al.Addr] = r.key
	}
	noSave(t, g, "every ADD was already durable")
	f.store.release()
	t.Logf("%d ADDs, 2 writes (%d + %d allocations)", n, len(first.Allocations), len(second.Allocations)-len(first.Allocations))
	f.checkPersisted(t)
}

// TestGroupCommitFailureRollsBackBatch: a write that fails undoes every
// change in it — while the next batch, built meanwhile, is in flight — and
// the next write holds none of them. The address a failed DEL was freeing
// is not handed out meanwhile, so it goes back to its holder and no
// address is ever held twice.
func TestGroupCommitFailureRollsBackBatch(t *testing.T) {
	f := newPool(t, Config{Cooldown: -1})
	f.capacity(t, "eni-1", addrRange("10.0.1", 20, 8)...)
	ctx := context.Background()
	held, err := f.p.Add(ctx, key("held"), PodInfo{})
	if err != nil {
		t.Fatal(err)
	}
	seqBefore := f.p.Snapshot().UsageSeq
	g := f.store.hold()

	// Batch 1: one ADD, its write held.
	results := make(chan addResult, 8)
	goAdd(f, "w", results)
	recv(t, g.saving)

	// Batch 2 gathers meanwhile: three ADDs, then a DEL and a usage
	// sequence (in that order, so that only batch 3 can be tempted by the
	// address the DEL frees).
	for _, c := range []string{"a1", "a2", "a3"} {
		goAdd(f, c, results)
	}
	waitFor(t, func() bool { return len(f.p.Allocations()) == 5 })
	delErr := make(chan error, 1)
	go func() {
		_, _, err := f.p.Del(key("held"))
		delErr <- err
	}()
	waitFor(t, func() bool { _, stillHeld := f.p.Get(key("held")); return !stillHeld })
	seqErr := make(chan error, 1)
	go func() {
		_, err := f.p.NextUsageSeq()
		seqErr <- err
	}()
	waitFor(t, func() bool { return f.p.Snapshot().UsageSeq == seqBefore+UsageSeqBlock })
	g.finish <- nil
	if r := recv(t, results); r.key != key("w") || r.err != nil || !r.persisted {
		t.Fatalf("batch 1: %+v", r)
	}
	b2 := recv(t, g.saving)
	if len(b2.Allocations) != 4 || holds(b2, key("held"), held.Addr) {
		t.Fatalf("batch 2 writes %+v", b2.Allocations)
	}

	// Batch 3 gathers while batch 2 is written. The address the DEL is
	// freeing is free in memory but must not be picked.
	goAdd(f, "b1", results)
	waitFor(t, func() bool { _, ok := f.p.Get(key("b1")); return ok })
	if b1, _ := f.p.Get(key("b1")); b1.Addr == held.Addr {
		t.Fatalf("%s handed to b1 while the DEL freeing it was in flight", held.Addr)
	}
	g.finish <- errDiskFull // batch 2 fails

	for range 3 {
		r := recv(t, results)
		if !errors.Is(r.err, errDiskFull) || r.persisted {
			t.Fatalf("ADD %s in the failed write: %+v", r.key, r)
		}
	}
	if err := recv(t, delErr); !errors.Is(err, errDiskFull) {
		t.Fatalf("DEL in the failed write: %v", err)
	}
	if err := recv(t, seqErr); !errors.Is(err, errDiskFull) {
		t.Fatalf("NextUsageSeq in the failed write: %v", err)
	}
	b3 := recv(t, g.saving)
	if err := b3.Validate(); err != nil {
		t.Fatalf("write after the rollback: %v", err)
	}
	keys := containerIDs(b3)
	if !slices.Equal(keys, []string{"b1", "held", "w"}) || !holds(b3, key("held"), held.Addr) || b3.UsageSeq != seqBefore {
		t.Fatalf("write after the rollback holds %v (usage seq %d), want b1, held (on %s), w and seq %d",
			keys, b3.UsageSeq, held.Addr, seqBefore)
	}
	g.finish <- nil
	if r := recv(t, results); r.key != key("b1") || r.err != nil || !r.persisted {
		t.Fatalf("batch 3: %+v", r)
	}
	f.store.release()
	f.checkPersisted(t)

	// The rolled-back ADDs succeed when retried, on addresses no one holds.
	for _, c := range []string{"a1", "a2", "a3"} {
		if _, err := f.p.Add(ctx, key(c), PodInfo{}); err != nil {
			t.Fatalf("retried ADD %s: %v", c, err)
		}
	}
	if n := len(f.p.Allocations()); n != 6 {
		t.Fatalf("%d allocations, want 6", n)
	}
	if seq, err := f.p.NextUsageSeq(); err != nil || seq != seqBefore+1 {
		t.Fatalf("usage seq after rollback: %d, %v; want %d", seq, err, seqBefore+1)
	}
	f.checkPersisted(t) // Validate: no address held twice
}

// TestExclusiveWaitsForFlight: a release proposal decides on durable state
// only. While a DEL's write is in flight it waits (and ADDs arriving now
// wait behind it); the DEL fails, so the address it was freeing is still
// held and is not agreed for release. An ADD waiting for an address gets it
// only once a DEL freeing it is durable.
func TestExclusiveWaitsForFlight(t *testing.T) {
	f := newPool(t, Config{Cooldown: -1})
	f.capacity(t, "eni-1", "10.0.1.11")
	ctx := context.Background()
	al, err := f.p.Add(ctx, key("c1"), PodInfo{})
	if err != nil {
		t.Fatal(err)
	}
	g := f.store.hold()
	delErr := make(chan error, 1)
	go func() {
		_, _, err := f.p.Del(key("c1"))
		delErr <- err
	}()
	recv(t, g.saving)
	type ackResult struct {
		ack Ack
		err error
	}
	acks := make(chan ackResult, 1)
	go func() {
		ack, err := f.p.ProposeRelease("r", []netip.Addr{al.Addr}, nil)
		acks <- ackResult{ack, err}
	}()
	waitFor(t, func() bool { return f.p.exclusiveWaiting() == 1 })
	results := make(chan addResult, 1)
	goAdd(f, "c2", results)
	waitFor(t, func() bool { return f.p.arriving.Load() == 1 })

	g.finish <- errDiskFull
	if err := recv(t, delErr); !errors.Is(err, errDiskFull) {
		t.Fatalf("DEL: %v", err)
	}
	a := recv(t, acks)
	if a.err != nil || !a.ack.Empty() {
		t.Fatalf("release of %s, still held after the failed DEL: %+v, %v", al.Addr, a.ack, a.err)
	}
	noSave(t, g, "the proposal agreed to nothing")
	// c2 found no free address and waits.
	waitFor(t, func() bool { return f.p.Pending() == 1 })
	if got, ok := f.p.Get(key("c1")); !ok || got != al {
		t.Fatalf("c1 after the failed DEL: %+v %v", got, ok)
	}

	go func() {
		_, _, err := f.p.Del(key("c1"))
		delErr <- err
	}()
	if st := recv(t, g.saving); len(st.Allocations) != 0 {
		t.Fatalf("the DEL's write holds %+v", st.Allocations)
	}
	select {
	case r := <-results:
		t.Fatalf("ADD got an address while the DEL freeing it was in flight: %+v", r)
	default:
	}
	g.finish <- nil
	if err := recv(t, delErr); err != nil {
		t.Fatal(err)
	}
	recv(t, g.saving) // c2's
	g.finish <- nil
	if r := recv(t, results); r.err != nil || r.al.Addr != al.Addr || !r.persisted {
		t.Fatalf("c2: %+v", r)
	}
	f.store.release()
	f.checkPersisted(t)
}

// TestSameKeyWaitsForFlight: a second ADD of a key whose first ADD is in
// flight waits for it rather than answer with an allocation that may not
// survive; when that write fails, the second ADD makes its own.
func TestSameKeyWaitsForFlight(t *testing.T) {
	f := newPool(t, Config{})
	f.capacity(t, "eni-1", "10.0.1.11", "10.0.1.12")
	g := f.store.hold()
	results := make(chan addResult, 2)
	goAdd(f, "c1", results)
	recv(t, g.saving)
	goAdd(f, "c1", results)
	waitFor(t, func() bool { return f.p.arriving.Load() == 1 })
	noSave(t, g, "the second ADD waits for the first")
	g.finish <- errDiskFull
	if r := recv(t, results); !errors.Is(r.err, errDiskFull) {
		t.Fatalf("first ADD: %+v", r)
	}
	st := recv(t, g.saving)
	g.finish <- nil
	r := recv(t, results)
	if r.err != nil || !r.persisted || !holds(st, key("c1"), r.al.Addr) {
		t.Fatalf("second ADD: %+v", r)
	}
	f.store.release()
	f.checkPersisted(t)
}

// flakyStore fails every n-th Save once armed.
type flakyStore struct {
	*memStore
	every int64
	armed atomic.Bool
	calls atomic.Int64
}

func (s *flakyStore) Save(st checkpoint.State) error {
	if s.armed.Load() && s.calls.Add(1)%s.every == 0 {
		return errDiskFull
	}
	return s.memStore.Save(st)
}

// TestGroupCommitStormWithFailures races ADDs and DELs on a small pool
// (no cooldown, so freed addresses are reused at once) while every third
// write fails. Each worker owns its keys, so each answer can be checked
// against the checkpoint the moment it is given: a success is durable, a
// failure left nothing behind, in memory or on disk. Snapshots stay valid
// throughout and the pool ends equal to its checkpoint.
func TestGroupCommitStormWithFailures(t *testing.T) {
	mem := &memStore{}
	store := &flakyStore{memStore: mem, every: 3}
	f := newPool(t, Config{Cooldown: -1, Store: store})
	f.store = mem
	f.capacity(t, "eni-1", addrRange("10.0.1", 20, 10)...)
	store.armed.Store(true)

	stop := make(chan struct{})
	checked := make(chan error, 1)
	go func() {
		defer close(checked)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				if err := f.p.Snapshot().Validate(); err != nil {
					checked <- err
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	var served, failed atomic.Int64
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 11))
			for range 150 {
				k := key(fmt.Sprintf("w%d-%d", w, r.IntN(3)))
				if r.IntN(2) == 0 {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
					al, err := f.p.Add(ctx, k, PodInfo{})
					cancel()
					last, _ := mem.state()
					_, inMem := f.p.Get(k)
					switch {
					case err == nil && !holds(last, k, al.Addr):
						t.Errorf("ADD %s answered %s before it was durable", k, al.Addr)
					case errors.Is(err, errDiskFull) && (inMem || slices.ContainsFunc(last.Allocations,
						func(a checkpoint.Allocation) bool { return a.ContainerID == k.ContainerID })):
						t.Errorf("failed ADD %s left an allocation (memory %v)", k, inMem)
					case err != nil && !errors.Is(err, errDiskFull) && !errors.Is(err, ErrNoAddress):
						t.Errorf("ADD %s: %v", k, err)
					}
					if err == nil {
						served.Add(1)
					}
					continue
				}
				before, had := f.p.Get(k)
				_, found, err := f.p.Del(k)
				last, _ := mem.state()
				now, has := f.p.Get(k)
				switch {
				case err == nil && (has || holds(last, k, before.Addr)):
					t.Errorf("DEL %s answered before it was durable", k)
				case err != nil && (!errors.Is(err, errDiskFull) || !has || now != before || !holds(last, k, before.Addr)):
					t.Errorf("failed DEL %s: %v; still held %v", k, err, has)
				case err == nil && found != had:
					t.Errorf("DEL %s found=%v, held before %v", k, found, had)
				}
				if err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-checked; err != nil {
		t.Fatalf("mid-storm: %v", err)
	}
	t.Logf("%d ADDs served, %d failed DELs, %d writes", served.Load(), failed.Load(), store.calls.Load())
	if served.Load() == 0 || failed.Load() == 0 {
		t.Fatal("storm exercised nothing")
	}
	f.checkPersisted(t)
}

// With CommitEachAlone every change is its own write, concurrent or not,
// and a failed write still undoes its change.
func TestCommitEachAlone(t *testing.T) {
	f := newPool(t, Config{CommitEachAlone: true, Cooldown: -1})
	f.capacity(t, "eni-0", addrRange("10.0.0", 20, 16)...)
	_, before := f.store.state()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.p.Add(context.Background(), key(fmt.Sprint("c", i)), PodInfo{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if _, after := f.store.state(); after-before != 16 {
		t.Errorf("16 concurrent ADDs took %d writes; want one each", after-before)
	}
	f.checkPersisted(t)

	if _, _, err := f.p.Del(key("c0")); err != nil {
		t.Fatal(err)
	}
	f.store.setFail(true)
	if _, err := f.p.Add(context.Background(), key("x"), PodInfo{}); !errors.Is(err, errDiskFull) {
		t.Fatalf("ADD with the disk failing: %v; want %v", err, errDiskFull)
	}
	if _, ok := f.p.Get(key("x")); ok {
		t.Error("the failed ADD's allocation was kept")
	}
	f.store.setFail(false)
	if _, err := f.p.Add(context.Background(), key("y"), PodInfo{}); err != nil {
		t.Fatalf("ADD after the disk recovered (the undone ADD's address must be free again): %v", err)
	}
	f.checkPersisted(t)
}
