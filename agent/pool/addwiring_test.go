package pool

import (
	"context"
	"errors"
	"testing"
	"time"
)

// AddWiring sends a new allocation before its write completes. When the
// write fails, the address is held back — no ADD gets it — until the
// caller's unhold; an allocation the key already had is not sent.
func TestAddWiringHoldsBackAFailedAllocation(t *testing.T) {
	f := newPool(t, Config{Cooldown: -1})
	f.capacity(t, "eni-0", "10.0.0.11")
	ctx := context.Background()

	g := f.store.hold()
	assigned := make(chan Allocation, 1)
	type result struct {
		al     Allocation
		unhold func()
		err    error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.al, r.unhold, r.err = f.p.AddWiring(ctx, key("c1"), PodInfo{}, assigned)
		done <- r
	}()
	sent := recv(t, assigned)
	recv(t, g.saving)
	g.finish <- errDiskFull
	r := recv(t, done)
	if !errors.Is(r.err, errDiskFull) || r.unhold == nil {
		t.Fatalf("AddWiring: %v (unhold %v), want the write's error and an unhold", r.err, r.unhold != nil)
	}
	f.store.release()
	if n := f.p.HeldBack(); n != 1 {
		t.Fatalf("%d addresses held back, want %s", n, sent.Addr)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := f.p.Add(short, key("c2"), PodInfo{}); !errors.Is(err, ErrNoAddress) {
		t.Fatalf("ADD while the failed allocation's address is held back: %v, want ErrNoAddress", err)
	}
	r.unhold()
	al, err := f.p.Add(ctx, key("c2"), PodInfo{})
	if err != nil || al.Addr != sent.Addr {
		t.Fatalf("ADD after unhold: %+v, %v; want %s", al, err, sent.Addr)
	}

	again := make(chan Allocation, 1)
	if got, unhold, err := f.p.AddWiring(ctx, key("c2"), PodInfo{}, again); err != nil || got != al || unhold != nil || len(again) != 0 {
		t.Fatalf("AddWiring of a recorded key: %+v, %v, sent %d; want %+v, none sent", got, err, len(again), al)
	}
	f.checkPersisted(t)
}
