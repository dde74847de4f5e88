package pool

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/checkpoint"
)

func TestReleaseHandshake(t *testing.T) {
	f := newPool(t, Config{})
	f.capacity(t, "eni-0", "10.0.0.11", "10.0.0.12", "10.0.0.13")
	pA := netip.MustParsePrefix("10.0.7.0/28")
	pB := netip.MustParsePrefix("10.0.7.16/28")
	if _, err := f.p.AddCapacity("eni-1", nil, []netip.Prefix{pA, pB}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f.p.Add(ctx, key("c1"), PodInfo{}) // .11
	f.p.Add(ctx, key("c2"), PodInfo{}) // .12
	f.p.Add(ctx, key("c3"), PodInfo{}) // .13
	f.p.Del(key("c2"))                 // .12 cooling
	c4, _ := f.p.Add(ctx, key("c4"), PodInfo{})
	if !pA.Contains(c4.Addr) {
		t.Fatalf("c4 got %s, want an address of %s", c4.Addr, pA)
	}
	f.capacity(t, "eni-0", "10.0.0.14") // free

	ack, err := f.p.ProposeRelease("rel-1",
		ips("10.0.0.11", "10.0.0.12", "10.0.0.14", "10.0.0.99", "10.0.7.20"),
		[]netip.Prefix{pA, pB, netip.MustParsePrefix("10.0.7.32/28")})
	if err != nil {
		t.Fatal(err)
	}
	// Assigned (.11), cooling (.12), unknown (.99), one address of a prefix
	// (.20), a prefix with a pod (pA) and an unknown prefix are refused.
	want := Ack{Addresses: ips("10.0.0.14"), Prefixes: []netip.Prefix{pB}}
	if !reflect.DeepEqual(ack, want) {
		t.Fatalf("ack %+v, want %+v", ack, want)
	}
	// What was agreed is persisted before the ack leaves.
	last, _ := f.store.state()
	rel := 0
	for _, a := range last.Addresses {
		if a.State == checkpoint.Releasing {
			rel++
			if a.ReleaseID != "rel-1" {
				t.Errorf("%s releasing under %q", a.Addr, a.ReleaseID)
			}
		}
	}
	if rel != 17 {
		t.Fatalf("persisted %d releasing addresses, want 17", rel)
	}
	// Re-proposal agrees to the same.
	again, err := f.p.ProposeRelease("rel-1", ips("10.0.0.11", "10.0.0.14"), ack.Prefixes)
	if err != nil || !slices.Equal(again.Addresses, ack.Addresses) || !slices.Equal(again.Prefixes, ack.Prefixes) {
		t.Fatalf("re-proposal: %+v, %v", again, err)
	}
	if ids := f.p.Releases(); !slices.Equal(ids, []string{"rel-1"}) {
		t.Fatalf("Releases = %v", ids)
	}
	// Releasing addresses are reported neither as assigned nor as free.
	_, free := f.p.Usage()
	if slices.Contains(free, netip.MustParseAddr("10.0.0.14")) {
		t.Fatal("releasing address reported free")
	}
	n, err := f.p.CompleteRelease("rel-1")
	if err != nil || n != 17 {
		t.Fatalf("CompleteRelease = %d, %v", n, err)
	}
	if len(f.p.Releases()) != 0 {
		t.Fatal("release still open")
	}
	f.checkPersisted(t)
}

func TestReleasingIsNeverHandedOut(t *testing.T) {
	f := newPool(t, Config{MaxWait: 20 * time.Millisecond})
	f.capacity(t, "eni-0", "10.0.0.11", "10.0.0.12")
	ack, err := f.p.ProposeRelease("rel-9", ips("10.0.0.11"), nil)
	if err != nil || len(ack.Addresses) != 1 {
		t.Fatalf("%+v %v", ack, err)
	}
	ctx := context.Background()
	a, err := f.p.Add(ctx, key("c1"), PodInfo{})
	if err != nil || a.Addr != netip.MustParseAddr("10.0.0.12") {
		t.Fatalf("%+v %v", a, err)
	}
	if _, err := f.p.Add(ctx, key("c2"), PodInfo{}); !errors.Is(err, ErrNoAddress) {
		t.Fatalf("got an address while the only other one is releasing: %v", err)
	}
	// The broker withdraws the proposal: the address is usable again.
	if n, err := f.p.CancelRelease("rel-9"); err != nil || n != 1 {
		t.Fatalf("CancelRelease = %d, %v", n, err)
	}
	if b, err := f.p.Add(ctx, key("c2"), PodInfo{}); err != nil || b.Addr != netip.MustParseAddr("10.0.0.11") {
		t.Fatalf("%+v %v", b, err)
	}
	f.checkPersisted(t)
}
