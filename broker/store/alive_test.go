package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
)

// heartbeats calls KeepAlive for ids on s every 200ms for d.
func heartbeats(t *testing.T, ctx context.Context, s *Store, ttl, d time.Duration, ids ...string) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		for _, id := range ids {
			if err := s.KeepAlive(ctx, id, ttl); err != nil {
				t.Fatalf("keepalive of %s: %v", id, err)
			}
		}
	}
}

func waitAlive(t *testing.T, s *Store, id string, want bool, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		alive, err := s.Alive(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if alive[id] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s alive = %v %s on, want %v", id, alive[id], within, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestKeepAliveWritesOnChangeOnly: heartbeats of live nodes cost etcd one
// shared lease renewal per TTL/3, not a write per node; a node whose
// heartbeats stop is still found dead (its key deleted) while the others
// keep the shared lease alive; when every heartbeat stops the lease
// expires and takes the keys with it.
func TestKeepAliveWritesOnChangeOnly(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	const ttl = 2 * time.Second
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		mustNode(t, s, id)
		if err := s.KeepAlive(ctx, id, ttl); err != nil {
			t.Fatal(err)
		}
	}
	if w := s.Writes(); w["KeepAliveGrant"] != 1 || w["KeepAlive"] != 3 {
		t.Fatalf("Writes = %v: want one lease and one key per node", w)
	}
	// i-3 stops; i-1 and i-2 go on for 3 TTLs.
	heartbeats(t, ctx, s, ttl, 3*ttl, "i-1", "i-2")
	w := s.Writes()
	if w["KeepAlive"] != 3 || w["KeepAliveGrant"] != 1 {
		t.Errorf("Writes = %v: heartbeats of recorded nodes wrote keys or leases", w)
	}
	// About one renewal per TTL/3: 9 in 3 TTLs, not one per heartbeat (60).
	if r := w["KeepAliveRenew"]; r < 3 || r > 12 {
		t.Errorf("%d renewals in 3 TTLs, want about 9", r)
	}
	alive, err := s.Alive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !alive["i-1"] || !alive["i-2"] || alive["i-3"] {
		t.Fatalf("Alive = %v: want i-1 and i-2 only (i-3 stopped 3 TTLs ago)", alive)
	}
	if w["AliveExpire"] != 1 {
		t.Errorf("Writes = %v: want i-3's key deleted once", w)
	}
	// Nobody heartbeats: the lease expires (etcd may stretch a short TTL).
	waitAlive(t, s, "i-1", false, 20*time.Second)
	waitAlive(t, s, "i-2", false, time.Second)
	// A node that comes back is recorded again on a new lease.
	if err := s.KeepAlive(ctx, "i-3", ttl); err != nil {
		t.Fatal(err)
	}
	waitAlive(t, s, "i-3", true, time.Second)
}

// TestKeepAliveMovedNode: a node whose heartbeats move to another replica
// stays alive; the first replica's sweep does not delete the key now on
// the other's lease, and writes it again when the node comes back.
func TestKeepAliveMovedNode(t *testing.T) {
	cli := etcdembedtest.Start(t)
	a, err := Open(cli, "test")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(cli, "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	const ttl = 2 * time.Second
	mustNode(t, a, "i-1")
	mustNode(t, a, "i-2")
	for _, id := range []string{"i-1", "i-2"} {
		if err := a.KeepAlive(ctx, id, ttl); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.KeepAlive(ctx, "i-1", ttl); err != nil {
		t.Fatal(err)
	}
	// a keeps sweeping on i-2's heartbeats while i-1 heartbeats at b.
	done := make(chan struct{})
	go func() {
		defer close(done)
		heartbeats(t, ctx, b, ttl, 3*ttl, "i-1")
	}()
	heartbeats(t, ctx, a, ttl, 3*ttl, "i-2")
	<-done
	waitAlive(t, a, "i-1", true, 0)
	if w := a.Writes(); w["AliveExpire"] != 0 {
		t.Errorf("replica a deleted %d alive keys, want none", w["AliveExpire"])
	}
	// Back at a, i-1's key is written on a's lease again.
	before := a.Writes()["KeepAlive"]
	if err := a.KeepAlive(context.Background(), "i-1", ttl); err != nil {
		t.Fatal(err)
	}
	if a.Writes()["KeepAlive"] != before+1 {
		t.Errorf("replica a did not record i-1 again after it moved back")
	}
}

// TestAliveReadsKeysOnly: Alive names the nodes from their keys alone, so
// a liveness record that does not decode still counts its node alive and
// fails nothing, and a node without a key is not alive.
func TestAliveReadsKeysOnly(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	mustNode(t, s, "i-1")
	if err := s.KeepAlive(ctx, "i-1", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cli.Put(ctx, s.key(kindAlive, "i-2"), "{not json"); err != nil {
		t.Fatal(err)
	}
	alive, err := s.Alive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !alive["i-1"] || !alive["i-2"] || alive["i-3"] || len(alive) != 2 {
		t.Errorf("Alive = %v, want i-1 and i-2", alive)
	}
}

// TestKeepAliveOneGrantForMany: heartbeats that find no shared lease at
// the same moment (a replica's first ones, or the first after its lease
// expired) share one grant: a write each would land on an etcd that is
// already behind, and each but one would be revoked again.
func TestKeepAliveOneGrantForMany(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	const nodes = 64
	ids := make([]string, nodes)
	for i := range ids {
		ids[i] = fmt.Sprintf("i-%d", i)
		mustNode(t, s, ids[i])
	}
	start := make(chan struct{})
	errs := make(chan error, nodes)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			<-start
			errs <- s.KeepAlive(ctx, id, 5*time.Second)
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if w := s.Writes(); w["KeepAliveGrant"] != 1 || w["KeepAlive"] != nodes {
		t.Errorf("Writes = %v: want one lease granted and one key per node", w)
	}
	alive, err := s.Alive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(alive) != nodes {
		t.Errorf("%d nodes alive, want %d", len(alive), nodes)
	}
	resp, err := s.cli.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Leases) != 1 {
		t.Errorf("etcd holds %d leases, want the one shared lease", len(resp.Leases))
	}
}

// TestKeepAliveRenewsPastGivenUpCalls: the shared lease's renewal is the
// replica's, not the heartbeat call's. Heartbeats whose callers have given
// up (an agent's call that timed out while etcd was busy) still keep their
// nodes alive, and say so.
func TestKeepAliveRenewsPastGivenUpCalls(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	const ttl = 2 * time.Second
	for _, id := range []string{"i-1", "i-2"} {
		mustNode(t, s, id)
		if err := s.KeepAlive(ctx, id, ttl); err != nil {
			t.Fatal(err)
		}
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	heartbeats(t, gone, s, ttl, 3*ttl, "i-1", "i-2")
	alive, err := s.Alive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !alive["i-1"] || !alive["i-2"] {
		t.Fatalf("Alive = %v after 3 TTLs of heartbeats: want both nodes", alive)
	}
	if w := s.Writes(); w["KeepAliveGrant"] != 1 || w["KeepAlive"] != 2 || w["AliveExpire"] != 0 {
		t.Errorf("Writes = %v: want the first lease and keys kept", w)
	}
}
