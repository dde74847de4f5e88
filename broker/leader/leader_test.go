package leader

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/allotnet/allot/broker/etcdembed"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
)

// replica is one elector with its own etcd client (as a separate broker
// process would have) and a record of its terms as leader.
type replica struct {
	name string
	cli  *clientv3.Client
	el   *Elector

	mu      sync.Mutex
	started int           // terms begun
	ended   int           // terms whose ctx was cancelled
	leading chan struct{} // receives when a term begins
	stopped chan struct{} // receives when a term's ctx ends
	done    chan struct{} // closed when Run returns
	cancel  context.CancelFunc
}

func newReplica(t *testing.T, srv *etcdembed.Server, name string, ttl time.Duration) *replica {
	t.Helper()
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	el, err := New(Config{Client: cli, Prefix: "/allot/v1/test/", Name: name, TTL: ttl,
		RetryDelay: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, cli: cli, el: el,
		leading: make(chan struct{}, 10), stopped: make(chan struct{}, 10), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		_ = el.Run(ctx, func(ctx context.Context) error {
			r.mu.Lock()
			r.started++
			r.mu.Unlock()
			r.leading <- struct{}{}
			<-ctx.Done()
			r.mu.Lock()
			r.ended++
			r.mu.Unlock()
			r.stopped <- struct{}{}
			return ctx.Err()
		})
	}()
	t.Cleanup(func() {
		r.stop(t)
		_ = cli.Close()
	})
	return r
}

func (r *replica) stop(t *testing.T) {
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		t.Errorf("%s: Run did not return after cancel", r.name)
	}
}

// waitLeader returns whichever replica starts leading first.
func waitLeader(t *testing.T, rs ...*replica) *replica {
	t.Helper()
	cases := make(chan *replica, len(rs))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, r := range rs {
		go func() {
			select {
			case <-r.leading:
				cases <- r
			case <-ctx.Done():
			}
		}()
	}
	select {
	case r := <-cases:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no replica became leader")
		return nil
	}
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func leaderName(t *testing.T, el *Elector) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := el.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStandbyTakesOverWhenLeaderSessionIsLost revokes the leader's session
// lease, as etcd does when a leader dies or is partitioned for the TTL: the
// leader's work must be cancelled and the standby must start its own.
func TestStandbyTakesOverWhenLeaderSessionIsLost(t *testing.T) {
	srv := etcdembedtest.StartServer(t)
	a := newReplica(t, srv, "broker-a", 2*time.Second)
	b := newReplica(t, srv, "broker-b", 2*time.Second)

	first := waitLeader(t, a, b)
	standby := b
	if first == b {
		standby = a
	}
	if got := leaderName(t, standby.el); got != first.name {
		t.Fatalf("standby reports leader %q, want %q", got, first.name)
	}
	if !first.el.IsLeader() || standby.el.IsLeader() {
		t.Fatalf("IsLeader: %s=%v %s=%v", first.name, first.el.IsLeader(), standby.name, standby.el.IsLeader())
	}

	// Kill the leader's session from outside.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := first.cli.Revoke(ctx, first.el.Lease()); err != nil {
		t.Fatal(err)
	}
	wait(t, first.stopped, first.name+"'s work to be cancelled")
	wait(t, standby.leading, standby.name+" to take over")
	if got := leaderName(t, first.el); got != standby.name {
		t.Fatalf("leader after takeover %q, want %q", got, standby.name)
	}
	first.mu.Lock()
	defer first.mu.Unlock()
	if first.ended != first.started {
		t.Fatalf("%s: %d terms started, %d ended", first.name, first.started, first.ended)
	}
}

// TestLeaderClientDeathHandsOver closes the leader's etcd client, the way a
// crashed process stops refreshing its lease; the standby must take over
// once the lease expires.
func TestLeaderClientDeathHandsOver(t *testing.T) {
	srv := etcdembedtest.StartServer(t)
	a := newReplica(t, srv, "broker-a", 2*time.Second)
	wait(t, a.leading, "broker-a to lead")
	b := newReplica(t, srv, "broker-b", 2*time.Second)

	// Orphan the lease (no revoke) and drop the connection.
	_ = a.cli.Close()
	wait(t, a.stopped, "broker-a's work to be cancelled")
	wait(t, b.leading, "broker-b to take over after broker-a's lease expired")
	if got := leaderName(t, b.el); got != "broker-b" {
		t.Fatalf("leader %q, want broker-b", got)
	}
}

// TestShutdownResigns checks a clean shutdown hands over at once: with a
// 60 s TTL, the standby can only lead within the test's timeout if the
// leader resigned and revoked its lease.
func TestShutdownResigns(t *testing.T) {
	srv := etcdembedtest.StartServer(t)
	a := newReplica(t, srv, "broker-a", 60*time.Second)
	wait(t, a.leading, "broker-a to lead")
	b := newReplica(t, srv, "broker-b", 60*time.Second)

	a.stop(t)
	wait(t, a.stopped, "broker-a's work to be cancelled")
	wait(t, b.leading, "broker-b to take over after broker-a resigned")
	if got := leaderName(t, b.el); got != "broker-b" {
		t.Fatalf("leader %q, want broker-b", got)
	}
}

// TestWorkReturningResigns: if the engine stops on its own (a bug, a fatal
// error), the replica must not sit on the lead doing nothing.
func TestWorkReturningResigns(t *testing.T) {
	srv := etcdembedtest.StartServer(t)
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	el, err := New(Config{Client: cli, Prefix: "/allot/v1/test/", Name: "broker-a", TTL: 60 * time.Second,
		RetryDelay: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	returned := make(chan struct{})
	go func() {
		_ = el.Run(ctx, func(context.Context) error {
			defer close(returned)
			return errors.New("engine failed")
		})
	}()
	wait(t, returned, "the work to run")
	// The resignation follows the return; poll the leader key briefly.
	deadline := time.Now().Add(20 * time.Second)
	for leaderName(t, el) != "" {
		if time.Now().After(deadline) {
			t.Fatal("replica still holds the lead after its work returned")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestNoLeader(t *testing.T) {
	cli := etcdembedtest.Start(t)
	el, err := New(Config{Client: cli, Prefix: "/allot/v1/test/", Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if got := leaderName(t, el); got != "" {
		t.Fatalf("leader %q before any campaign", got)
	}
	if _, err := New(Config{Client: cli}); err == nil {
		t.Fatal("New without a name succeeded")
	}
}
