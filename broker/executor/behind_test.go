package executor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/store"
)

// A view that follows etcd but has not reached the engine's latest write
// is waited for, not replaced by a full read, until it has been behind for
// behindRead; then one full read, and no second before behindRead again.
// A view that stopped following is read in full at once.
func TestBehindViewIsWaitedFor(t *testing.T) {
	cli := etcdembedtest.Start(t)
	st, err := store.Open(cli, "test")
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{st: newSerialStore(st), stats: newStats()}
	ctx, cancel := context.WithTimeout(store.WithWriteMark(context.Background(), &e.written), 30*time.Second)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = st.PutSubnet(ctx, store.Subnet{ID: "subnet-1", CIDR: "10.0.0.0/24", Usable: 251})
	must(err)
	_, err = st.PutNode(ctx, store.Node{InstanceID: "i-1", InstanceType: "m5.large", SubnetID: "subnet-1"})
	must(err)
	e.view = &view{}
	e.updates = st.Follow(ctx).Updates()
	if !e.caughtUp(ctx) {
		t.Fatal("the view did not catch up")
	}

	// The watch delivers nothing more: the engine's next write stays unseen.
	e.updates = make(chan store.FollowUpdate)
	must(st.PutDemand(ctx, store.Demand{InstanceID: "i-1", Pending: 7}))
	ph := newRoundPhases(false)
	if _, err := e.current(ctx, ph); !errors.Is(err, errBehind) {
		t.Fatalf("a live view behind the engine's write: %v, want errBehind", err)
	}
	if e.stats.FullReads != 0 || e.stats.Behind != 1 {
		t.Fatalf("%d full reads, %d rounds behind; want 0 and 1", e.stats.FullReads, e.stats.Behind)
	}

	e.view.behindSince = time.Now().Add(-behindRead - time.Second)
	snap, err := e.current(ctx, ph)
	must(err)
	if e.stats.FullReads != 1 || snap.demands.at("i-1").Pending != 7 {
		t.Fatalf("behind for longer than %v: %d full reads, demand %+v; want one read that holds the write",
			behindRead, e.stats.FullReads, snap.demands.at("i-1"))
	}
	if _, err := e.current(ctx, ph); !errors.Is(err, errBehind) || e.stats.FullReads != 1 {
		t.Fatalf("right after a full read, still behind: %v and %d full reads, want errBehind and 1", err, e.stats.FullReads)
	}

	e.view.live = false
	if _, err := e.current(ctx, ph); err != nil || e.stats.FullReads != 2 {
		t.Fatalf("a view that stopped following: %v and %d full reads, want a full read", err, e.stats.FullReads)
	}
}
