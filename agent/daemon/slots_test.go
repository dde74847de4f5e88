package daemon

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/brokerlink/brokertest"
	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
	"github.com/allotnet/allot/agent/pool"
)

// heldStore holds every checkpoint write while held is set, and counts the
// writes.
type heldStore struct {
	next pool.Persister
	mu   sync.Mutex
	held chan struct{} // closed to let held writes through
	n    int
}

func (s *heldStore) Save(st checkpoint.State) error {
	s.mu.Lock()
	s.n++
	h := s.held
	s.mu.Unlock()
	if h != nil {
		<-h
	}
	return s.next.Save(st)
}

func (s *heldStore) hold() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.held = ch
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.held = nil
		s.mu.Unlock()
		close(ch)
	}
}

func (s *heldStore) writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// A burst of DELs is bounded by the network slots only while it tears pods
// down: while a checkpoint write is slow, every DEL of the burst still gets
// its teardown done and joins the next write, rather than 8 at a time
// holding their slots through the write.
func TestDelBurstReachesGroupCommitTogether(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Cooldown = -1
	store := &heldStore{}
	a := e.startWith(cfg, hostnettest.NewRecorder(), e.broker.Client(), func(a *Agent) {
		a.wrapStore = func(p pool.Persister) pool.Persister { store.next = p; return store }
	})
	const pods = 14 // more than hostNetParallel; all one ENI holds
	e.deliver(a, pods)
	for i := range pods {
		mustAdd(t, a, podReq(fmt.Sprintf("c%02d", i), "pod"))
	}
	release := store.hold()
	defer func() {
		if release != nil {
			release()
		}
	}()
	before := store.writes()
	var wg sync.WaitGroup
	for i := range pods {
		wg.Go(func() {
			if err := a.Del(ctxT(t), podReq(fmt.Sprintf("c%02d", i), "pod")); err != nil {
				t.Errorf("del c%02d: %v", i, err)
			}
		})
	}
	brokertest.WaitFor(t, 20*time.Second, "every DEL's teardown while a checkpoint write is held", func() bool {
		return a.net.Count(hostnettest.OpTeardownPod) == pods
	})
	release()
	release = nil
	wg.Wait()
	// One write was held with the first DEL(s) in it; the rest share the
	// next one or two.
	if n := store.writes() - before; n > 3 {
		t.Fatalf("%d DELs took %d checkpoint writes, want at most 3", pods, n)
	}
	if n := len(a.Pool().Allocations()); n != 0 {
		t.Fatalf("%d allocations left after every DEL", n)
	}
}
