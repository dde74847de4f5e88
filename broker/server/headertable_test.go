package server

import (
	"crypto/tls"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestHeaderTableAdvertised: the broker tells every client, in its first
// HTTP/2 SETTINGS, to keep the header table it compresses against at
// HeaderTableSize, so that a connection's table holds no more than that
// however the agent's headers change from call to call. Over TLS, as
// agents connect.
func TestHeaderTableAdvertised(t *testing.T) {
	addr, ca := startTLSServer(t)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"}})
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
