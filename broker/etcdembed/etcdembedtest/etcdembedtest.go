// Package etcdembedtest starts a throwaway embedded etcd for tests. It is
// apart from etcdembed so that no product binary links package testing.
package etcdembedtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/allotnet/allot/broker/etcdembed"
)

// Start starts a fresh etcd in a temporary directory on free ports
// and returns a client to it; both are closed when the test ends. Fsync is
// off: the data dies with the test anyway, and it makes writes fast.
func Start(t testing.TB) *clientv3.Client {
	t.Helper()
	srv := StartServer(t)
	cli, err := srv.Client()
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	// Cleanups run last-in first-out: the client closes before the server.
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// StartServer is Start for tests that need the server itself,
// e.g. to open several clients (leader election) or to stop etcd mid-test.
// Close is safe to call again at cleanup.
func StartServer(t testing.TB) *etcdembed.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := etcdembed.Start(ctx, etcdembed.Config{
		Dir:               t.TempDir(),
		UnsafeNoFsync:     true,
		HeartbeatInterval: 10 * time.Millisecond,
		ElectionTimeout:   100 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(srv.Close)
	return srv
}
