package daemon

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/brokerlink/brokertest"
	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
	"github.com/allotnet/allot/agent/pool"
)

// failingStore holds every checkpoint write while held, and fails the
// writes of states that record an allocation of failFor.
type failingStore struct {
	heldStore
	failFor string
}

var (
	errWriteFailed = errors.New("checkpoint write failed")
	errTeardown    = errors.New("teardown failed")
)

func (s *failingStore) Save(st checkpoint.State) error {
	s.count()
	if slices.ContainsFunc(st.Allocations, func(al checkpoint.Allocation) bool { return al.ContainerID == s.failFor }) {
		return errWriteFailed
	}
	return s.next.Save(st)
}

func startWithStore(e *env, store interface {
	pool.Persister
	setNext(pool.Persister)
}) *agentRun {
	cfg := e.config()
	cfg.Cooldown = -1
	cfg.Limits = pool.Limits{MaxENIs: 4, IPv4PerENI: 15}
	return e.startWith(cfg, hostnettest.NewRecorder(), e.broker.Client(), func(a *Agent) {
		a.wrapStore = func(p pool.Persister) pool.Persister { store.setNext(p); return store }
	})
}

func (s *heldStore) setNext(p pool.Persister) { s.next = p }

// An ADD wires the pod while its allocation's record is being written,
// and answers only once the record is durable.
func TestAddWiresWhileItsRecordIsWritten(t *testing.T) {
	e := newEnv(t)
	store := &heldStore{}
	a := startWithStore(e, store)
	e.deliver(a, 1)
	req := podReq("c1", "web-0")

	release := store.hold()
	done := make(chan error, 1)
	go func() { _, err := a.Add(ctxT(t), req); done <- err }()
	brokertest.WaitFor(t, 20*time.Second, "the pod wired while its record's write is held", func() bool {
		_, ok := wired(a.net, req)
		return ok
	})
	select {
	case err := <-done:
		t.Fatalf("ADD answered (%v) while its record's write was held", err)
	default:
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("add: %v", err)
	}
	st, err := checkpoint.New(e.checkpointPath()).Load()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(st.Allocations, func(al checkpoint.Allocation) bool { return al.ContainerID == "c1" }) {
		t.Fatal("ADD answered but the checkpoint does not hold its allocation")
	}
}

// An ADD whose record cannot be written fails, and its pod's pieces are
// removed before the address goes to anyone else: a second ADD waiting for
// the node's only address gets it only after the first pod's teardown —
// which fails once and is retried — and wires it (the recorder refuses an
// address another pod still routes).
func TestAddWhoseRecordFailsFreesTheAddressAfterTheTeardown(t *testing.T) {
	e := newEnv(t)
	store := &failingStore{failFor: "c1"}
	a := startWithStore(e, store)
	addr := e.deliver(a, 1)[0]
	first, second := podReq("c1", "web-0"), podReq("c2", "web-1")

	release := store.hold()
	var wg sync.WaitGroup
	var firstErr, secondErr error
	var secondRes cniserver.AddResult
	wg.Go(func() { _, firstErr = a.Add(ctxT(t), first) })
	brokertest.WaitFor(t, 20*time.Second, "the first pod wired while its record's write is held", func() bool {
		_, ok := wired(a.net, first)
		return ok
	})
	wg.Go(func() { secondRes, secondErr = a.Add(ctxT(t), second) })
	brokertest.WaitFor(t, 20*time.Second, "the second ADD waiting for an address", func() bool {
		return a.Pool().Demand(pool.Targets{}, pool.Limits{MaxENIs: 4, IPv4PerENI: 15}).Pending == 1
	})
	a.net.FailNext(hostnettest.OpTeardownPod, errTeardown)
	release()
	wg.Wait()

	if !errors.Is(firstErr, errWriteFailed) {
		t.Fatalf("first ADD: %v, want the write's failure", firstErr)
	}
	if secondErr != nil {
		t.Fatalf("second ADD: %v", secondErr)
	}
	if secondRes.Address.Addr() != addr {
		t.Fatalf("second ADD got %v, want the node's only address %v", secondRes.Address, addr)
	}
	if _, ok := wired(a.net, first); ok {
		t.Fatal("the failed ADD's pod is still wired")
	}
	if got, ok := wired(a.net, second); !ok || got != addr {
		t.Fatalf("second pod wired with %v (%v), want %v", got, ok, addr)
	}
	if _, ok := a.Pool().Get(keyOf(first.Attachment)); ok {
		t.Fatal("the failed ADD's allocation is in the pool")
	}
	if n := a.Pool().HeldBack(); n != 0 {
		t.Fatalf("%d addresses still held back", n)
	}
	if f := a.net.Failures(); len(f) != 1 || f[0].Op != hostnettest.OpTeardownPod || f[0].Attachment != first.Attachment {
		t.Fatalf("host network calls failed: %+v, want only the first pod's first teardown", f)
	}
}
