package server

import (
	"crypto/tls"
	"log/slog"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/allotnet/allot/broker/auth/devca"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/store"
)

// TestHeaderTableAdvertised: the broker tells every client, in its first
// HTTP/2 SETTINGS, to keep the header table it compresses against at
// HeaderTableSize, so that a connection's table holds no more than that
// however the agent's headers change from call to call. Over TLS, as
// agents connect.
func TestHeaderTableAdvertised(t *testing.T) {
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
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop(ctxT(t))

	conn, err := tls.Dial("tcp", lis.Addr().String(), &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A stuck server fails the test rather than hanging it.
	if err := conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no SETTINGS from the broker: %v", err)
		}
		sf, ok := f.(*http2.SettingsFrame)
		if !ok || sf.IsAck() {
			continue
		}
		v, ok := sf.Value(http2.SettingHeaderTableSize)
		if !ok || v != HeaderTableSize {
			t.Errorf("header table size advertised: %d (set: %v); want %d", v, ok, HeaderTableSize)
		}
		return
	}
}
