package server

import (
	"crypto/tls"
	"log/slog"
	"testing"

	"github.com/allotnet/allot/broker/auth/devca"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/store"
)

// startTLSServer serves a broker over TLS, as agents reach it, with a
// certificate for 127.0.0.1 from a fresh CA, on real etcd; it is stopped
// when the test ends. It returns the address and the CA to trust.
func startTLSServer(t *testing.T) (string, *devca.CA) {
	t.Helper()
	ca, err := devca.New("test")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Server("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := leaf.TLS()
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(etcdembedtest.Start(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{
		Store: st, Leader: fixedLeader("broker-a"), Logger: slog.New(slog.DiscardHandler),
		ServerOptions: TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return serveLocal(t, srv), ca
}
