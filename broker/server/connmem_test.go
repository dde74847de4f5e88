package server

import (
	"crypto/tls"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestConnectionMemory: an idle agent connection (TLS, as agents connect;
// gRPC pools the read buffer of a plain TCP connection itself) costs the
// broker its TLS and HTTP/2 state and a 4 KiB read buffer, not gRPC's
// default 32 KiB one: a 5,000-node cluster holds 5,000 of them. The
// clients use small buffers so that the server's side dominates what the
// process holds.
func TestConnectionMemory(t *testing.T) {
	addr, ca := startTLSServer(t)
	creds := credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS13})

	const conns = 200
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapInuse)
	}
	before := heap()
	for range conns {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
			grpc.WithReadBufferSize(512), grpc.WithWriteBufferSize(0))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := healthpb.NewHealthClient(c).Check(ctxT(t), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	per := (heap() - before) / conns
	t.Logf("%d connections: %d bytes of heap each (client and server)", conns, per)
	if per > limitPerConn {
		t.Errorf("%d connections cost %d bytes of heap each; want at most %d", conns, per, limitPerConn)
	}
}

// limitPerConn is between what a connection costs here with the 4 KiB read
// buffer (66 to 70 KiB, both ends) and with gRPC's default 32 KiB one (100
// to 105 KiB).
const limitPerConn = 85 << 10
