package store

import (
	"context"
	"testing"
	"time"
)

func TestWatchFiresAndCoalesces(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	ch := s.Watch(ctx)
	// Give the watch a moment to be established before writing; a missed
	// first event would only make the wait below fail, never pass wrongly.
	time.Sleep(100 * time.Millisecond)
	var last Subnet
	for i := 0; i < 20; i++ {
		var err error
		if last, err = s.PutSubnet(ctx, Subnet{ID: "subnet-1", Usable: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Nobody read while 20 writes happened; the reader catches up to the
	// last revision without 20 stale notifications queued.
	got := int64(0)
	reads := 0
	timeout := time.After(20 * time.Second)
	for got < last.Rev {
		select {
		case got = <-ch:
			reads++
		case <-timeout:
			t.Fatalf("watch reached revision %d, want %d", got, last.Rev)
		}
	}
	if got != last.Rev {
		t.Errorf("watch revision %d, want %d", got, last.Rev)
	}
	// Coalesced: once caught up, no stale revision is still queued (the
	// watch goroutine delivers events in batches whose timing depends on the
	// machine, so the number of reads above is not fixed; what is fixed is
	// that at most one, the newest, is ever buffered).
	select {
	case rev := <-ch:
		if rev != last.Rev {
			t.Errorf("stale notification %d queued after catching up to %d", rev, last.Rev)
		}
	default:
	}
	if reads > 20 {
		t.Errorf("%d notifications for 20 writes", reads)
	}
	// Writes outside the prefix don't notify.
	if _, err := s.Client().Put(ctx, "/other/key", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetUsedByOthers(ctx, "subnet-1", 1); err != nil {
		t.Fatal(err)
	}
	select {
	case rev := <-ch:
		if rev != last.Rev+2 {
			t.Errorf("notified at %d, want %d (our write, not the foreign one)", rev, last.Rev+2)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no notification for SetUsedByOthers")
	}
	cancel()
	for range ch {
	}
}
