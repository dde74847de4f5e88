package pool

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/checkpoint"
)

// A released address is free in the records at once, but no ADD gets it
// and no broker release takes it until its hold ends; then a waiting ADD
// does.
func TestReleasedAddressHeldBackUntilUnhold(t *testing.T) {
	f := newPool(t, Config{Cooldown: -1, MaxWait: 5 * time.Second})
	f.capacity(t, "eni-0", "10.0.0.11")
	ctx := context.Background()
	if _, err := f.p.Add(ctx, key("c1"), PodInfo{}); err != nil {
		t.Fatal(err)
	}
	al, found, unhold, err := f.p.Release(key("c1"))
	if err != nil || !found || unhold == nil || al.Addr != netip.MustParseAddr("10.0.0.11") {
		t.Fatalf("release: %+v %v %v", al, found, err)
	}
	// Durable: the checkpoint holds the release.
	last, _ := f.store.state()
	if len(last.Allocations) != 0 || last.Addresses[0].State != checkpoint.Free {
		t.Fatalf("checkpoint after release: %+v", last)
	}
	// Shown as cooling: on its way back, not free yet.
	if s := f.p.Stats(); s.Cooling != 1 || f.p.HeldBack() != 1 {
		t.Fatalf("held address not shown cooling: %+v, held %d", s, f.p.HeldBack())
	}
	ack, err := f.p.ProposeRelease("rel-1", ips("10.0.0.11"), nil)
	if err != nil || len(ack.Addresses) != 0 {
		t.Fatalf("broker release agreed to a held address: %+v %v", ack, err)
	}
	if err := f.p.RemoveENI("eni-0"); !errors.Is(err, ErrInUse) {
		t.Fatalf("RemoveENI with a held address: %v, want ErrInUse", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := f.p.Add(short, key("c2"), PodInfo{}); err == nil {
		t.Fatal("an ADD got the held address")
	}
	got := make(chan error, 1)
	go func() {
		al, err := f.p.Add(ctx, key("c3"), PodInfo{})
		if err == nil && al.Addr != netip.MustParseAddr("10.0.0.11") {
			err = errors.New("got " + al.Addr.String())
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("waiting ADD finished before the hold ended: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	unhold()
	unhold() // a second call does nothing
	if err := <-got; err != nil {
		t.Fatalf("waiting ADD after unhold: %v", err)
	}
	if f.p.HeldBack() != 0 {
		t.Fatalf("%d still held", f.p.HeldBack())
	}
}

// A release whose write fails gives the address back to its holder and
// holds nothing back.
func TestFailedReleaseHoldsNothing(t *testing.T) {
	f := newPool(t, Config{Cooldown: -1})
	f.capacity(t, "eni-0", "10.0.0.11")
	if _, err := f.p.Add(context.Background(), key("c1"), PodInfo{}); err != nil {
		t.Fatal(err)
	}
	f.store.setFail(true)
	if _, _, unhold, err := f.p.Release(key("c1")); err == nil || unhold != nil {
		t.Fatalf("release with a failing disk: unhold %v, err %v", unhold != nil, err)
	}
	if _, ok := f.p.Get(key("c1")); !ok || f.p.HeldBack() != 0 {
		t.Fatalf("after a failed release: allocation kept %v, held %d", ok, f.p.HeldBack())
	}
	f.store.setFail(false)
	if _, found, unhold, err := f.p.Release(key("nope")); err != nil || found || unhold != nil {
		t.Fatalf("release of an unknown key: %v %v %v", found, unhold != nil, err)
	}
}
