package pool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/checkpoint"
)

// storm runs workers doing random ADDs and DELs over a small set of
// container IDs, so the same key is raced on constantly, while the clock
// moves (cooldowns end) and a checker validates snapshots mid-flight.
func storm(t *testing.T, f fixture, workers, ops, keys int) {
	t.Helper()
	var mu sync.Mutex
	var added, starved, deleted int
	count := func(n *int) { mu.Lock(); *n++; mu.Unlock() }
	defer func() {
		t.Logf("storm: %d ADDs served, %d timed out waiting, %d DELs freed an address", added, starved, deleted)
		if added == 0 || deleted == 0 {
			t.Errorf("storm exercised nothing")
		}
	}()
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { // time passes
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				f.clock.Advance(250 * time.Millisecond)
			}
		}
	}()
	go func() { // invariants hold at every instant
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
				if err := f.p.Snapshot().Validate(); err != nil {
					t.Errorf("mid-storm: %v", err)
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range ops {
				k := key(fmt.Sprintf("c%d", r.IntN(keys)))
				if r.IntN(2) == 0 {
					ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
					al, err := f.p.Add(ctx, k, PodInfo{PodName: k.ContainerID})
					cancel()
					switch {
					case err == nil:
						count(&added)
					case errors.Is(err, ErrNoAddress):
						count(&starved)
					default:
						t.Errorf("Add %s: %v", k, err)
					}
					if err == nil && al.Key != k {
						t.Errorf("Add %s returned %s's allocation", k, al.Key)
					}
				} else if _, found, err := f.p.Del(k); err != nil {
					t.Errorf("Del %s: %v", k, err)
				} else if found {
					count(&deleted)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	bg.Wait()
}

func checkAfterStorm(t *testing.T, f fixture, addrs int) {
	t.Helper()
	snap := f.p.Snapshot()
	if err := snap.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(snap.Addresses) != addrs {
		t.Fatalf("%d addresses after the storm, want %d", len(snap.Addresses), addrs)
	}
	held := map[netip.Addr]Key{}
	for _, al := range f.p.Allocations() {
		if other, dup := held[al.Addr]; dup {
			t.Fatalf("%s held by %s and %s", al.Addr, other, al.Key)
		}
		held[al.Addr] = al.Key
		if got, ok := f.p.Get(al.Key); !ok || got.Addr != al.Addr {
			t.Fatalf("Get(%s) disagrees with Allocations", al.Key)
		}
	}
	if f.p.Pending() != 0 {
		t.Fatalf("pending %d after all ADDs returned", f.p.Pending())
	}
	f.checkPersisted(t)
}

func TestConcurrentAddDel(t *testing.T) {
	f := newPool(t, Config{Cooldown: time.Second})
	var addrs []string
	for i := range 24 {
		addrs = append(addrs, fmt.Sprintf("10.0.0.%d", 20+i))
	}
	f.capacity(t, "eni-0", addrs...)
	storm(t, f, 16, 150, 40)
	checkAfterStorm(t, f, 24)
}

// TestConcurrentWithCheckpointFile runs a smaller storm against the real
// checkpoint file and checks the file agrees with the pool afterwards.
func TestConcurrentWithCheckpointFile(t *testing.T) {
	file := checkpoint.New(filepath.Join(t.TempDir(), "pool.json"))
	mem := &memStore{}
	f := newPool(t, Config{Cooldown: time.Second, Store: teeStore{file, mem}})
	f.store = mem
	f.capacity(t, "eni-1", "10.0.1.20", "10.0.1.21", "10.0.1.22", "10.0.1.23")
	storm(t, f, 4, 25, 8)
	checkAfterStorm(t, f, 4)
	onDisk, err := file.Load()
	if err != nil {
		t.Fatal(err)
	}
	now := f.clock.Now()
	if !equalStates(normal(onDisk, now), normal(f.p.Snapshot(), now)) {
		t.Fatalf("checkpoint file disagrees with the pool")
	}
}

// teeStore saves to the file and keeps a copy in memory for checks.
type teeStore struct {
	file *checkpoint.File
	mem  *memStore
}

func (s teeStore) Save(st checkpoint.State) error {
	if err := s.file.Save(st); err != nil {
		return err
	}
	return s.mem.Save(st)
}

func TestConcurrentSameKey(t *testing.T) {
	f := newPool(t, Config{})
	f.capacity(t, "eni-0", "10.0.0.11", "10.0.0.12", "10.0.0.13")
	var wg sync.WaitGroup
	got := make([]netip.Addr, 20)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			al, err := f.p.Add(context.Background(), key("same"), PodInfo{})
			if err != nil {
				t.Error(err)
			}
			got[i] = al.Addr
		}()
	}
	wg.Wait()
	for _, a := range got {
		if a != got[0] {
			t.Fatalf("concurrent ADDs of one key got different addresses: %v", got)
		}
	}
	if n := len(f.p.Allocations()); n != 1 {
		t.Fatalf("%d allocations", n)
	}
}
