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
	s.count()
	return s.next.Save(st)
}

// count counts a write and waits while writes are held.
func (s *heldStore) count() {
	s.mu.Lock()
	s.n++
	h := s.held
	s.mu.Unlock()
	if h != nil {
		<-h
	}
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

// A burst of DELs reaches the pool's group commit together: the network
// slots bound the teardowns, not the checkpoint writes. While one write is
// held, every DEL of the burst applies its release and joins the next
// write.
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
	// Changes in flight are visible to readers.
	brokertest.WaitFor(t, 20*time.Second, "every DEL's release applied while a checkpoint write is held", func() bool {
		return len(a.Pool().Allocations()) == 0
	})
	release()
	release = nil
	wg.Wait()
	a.WaitTeardowns()
	// The held write has the first release(s) in it; the rest share the
	// next (a usage report may add one of its own).
	if n := store.writes() - before; n > 3 {
		t.Fatalf("%d DELs took %d checkpoint writes, want at most 3", pods, n)
	}
	if n := a.net.Count(hostnettest.OpTeardownPod); n != pods {
		t.Fatalf("%d teardowns, want %d", n, pods)
	}
}
