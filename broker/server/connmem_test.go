package server

import (
	"runtime"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestConnectionMemory: an idle agent connection costs the broker its
// TLS-less HTTP/2 state and a small read buffer, under 52 KiB with the
// test's client side, where gRPC's default 32 KiB read and write buffers
// made it about 70 KiB: a 5,000-node cluster holds 5,000 of them. The
// clients use small buffers so that the server's side dominates.
func TestConnectionMemory(t *testing.T) {
	e := newEnv(t)
	const conns = 200
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before := heap()
	for range conns {
		c, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithReadBufferSize(512), grpc.WithWriteBufferSize(0), grpc.WithSharedWriteBuffer(true))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := healthpb.NewHealthClient(c).Check(ctxT(t), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	after := heap()
	per := (int64(after) - int64(before)) / conns
	t.Logf("%d connections: %d bytes of heap each (client and server)", conns, per)
	if per > 52<<10 {
		t.Errorf("%d connections cost %d bytes of heap each; want at most %d", conns, per, 52<<10)
	}
}
