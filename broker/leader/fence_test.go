package leader

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/allotnet/allot/broker/etcdembed"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// fencedReplica runs an Elector whose work hands out the context of each
// term, so the test can write through it as the engine would.
type fencedReplica struct {
	el    *Elector
	st    *store.Store
	terms chan context.Context
}

func startFenced(t *testing.T, srv *etcdembed.Server, name string) *fencedReplica {
	t.Helper()
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(cli, "test")
	if err != nil {
		t.Fatal(err)
	}
	el, err := New(Config{Client: cli, Prefix: st.Prefix(), Name: name, TTL: 5 * time.Second,
		RetryDelay: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r := &fencedReplica{el: el, st: st, terms: make(chan context.Context, 10)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = el.Run(ctx, func(ctx context.Context) error {
			r.terms <- ctx
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = cli.Close()
	})
	return r
}

func nextTerm(t *testing.T, r *fencedReplica) context.Context {
	t.Helper()
	select {
	case ctx := <-r.terms:
		return ctx
	case <-time.After(30 * time.Second):
		t.Fatal("replica did not start leading")
		return nil
	}
}

// TestDeposedLeaderCannotBeginIntent covers the window between a leader's
// lease ending and its keepalive noticing: the old leader's writes, made
// with its term's fence, must be refused while the new leader's succeed.
func TestDeposedLeaderCannotBeginIntent(t *testing.T) {
	srv := etcdembedtest.StartServer(t)
	a := startFenced(t, srv, "a")
	aCtx := nextTerm(t, a)
	b := startFenced(t, srv, "b")

	fa, ok := store.FenceFrom(aCtx)
	if !ok || fa != a.el.Fence() {
		t.Fatalf("term context fence = %+v, %v; elector says %+v", fa, ok, a.el.Fence())
	}
	if want := a.st.ElectionPrefix() + "/"; !strings.HasPrefix(fa.Key, want) || strings.Contains(fa.Key, "//") {
		t.Fatalf("election key %q: want it under %q without a double slash", fa.Key, want)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.st.PutSubnet(ctx, store.Subnet{ID: "subnet-1", Usable: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.st.PutNode(ctx, store.Node{InstanceID: "i-1", InstanceType: "m5.large", SubnetID: "subnet-1"}); err != nil {
		t.Fatal(err)
	}
	intent := func(id string) store.Intent {
		return store.Intent{ID: id, Kind: store.IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 3}
	}
	// While A leads, its fenced writes go through.
	if _, err := a.st.BeginIntent(store.WithFence(ctx, fa.Key, fa.Rev), intent("int-a-1")); err != nil {
		t.Fatalf("leader's fenced BeginIntent: %v", err)
	}

	// A's lease ends (as if it had expired); B takes over.
	if _, err := a.el.cfg.Client.Revoke(ctx, clientv3.LeaseID(a.el.Lease())); err != nil {
		t.Fatal(err)
	}
	bCtx := nextTerm(t, b)

	// A, not yet aware, writes with its old fence (a fresh context stands
	// for the moment before its keepalive cancels the term).
	aStale := store.WithFence(ctx, fa.Key, fa.Rev)
	_, err := a.st.BeginIntent(aStale, intent("int-a-2"))
	if !errors.Is(err, rpcerr.ErrNotLeader) {
		t.Fatalf("deposed leader's BeginIntent: got %v, want ErrNotLeader", err)
	}
	if _, err := a.st.GetIntent(ctx, "int-a-2"); !errors.Is(err, rpcerr.ErrNotFound) {
		t.Fatalf("refused intent: GetIntent = %v, want ErrNotFound (nothing written)", err)
	}
	sn, err := a.st.GetSubnet(ctx, "subnet-1")
	if err != nil {
		t.Fatal(err)
	}
	if sn.Reserved != 3 {
		t.Fatalf("subnet reserved %d, want 3 (only the first intent's)", sn.Reserved)
	}

	// B's term carries its own fence, and its writes proceed.
	if _, err := b.st.BeginIntent(bCtx, intent("int-b-1")); err != nil {
		t.Fatalf("new leader's BeginIntent: %v", err)
	}
	if fb, _ := store.FenceFrom(bCtx); fb == fa {
		t.Fatalf("new leader reuses the old fence %+v", fa)
	}
}
