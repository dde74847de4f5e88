package brokerlink

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/agent/brokerlink/brokertest"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// blackhole is a TCP proxy on 127.0.0.1 that can stop forwarding without
// closing anything, as a network partition does.
type blackhole struct {
	lis     net.Listener
	dropped atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

func newBlackhole(t *testing.T, backend string) *blackhole {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{lis: lis}
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", backend)
			if err != nil {
				_ = c.Close()
				continue
			}
			b.mu.Lock()
			b.conns = append(b.conns, c, s)
			b.mu.Unlock()
			go b.pipe(c, s)
			go b.pipe(s, c)
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range b.conns {
			_ = c.Close()
		}
	})
	return b
}

// pipe copies from src to dst until dropped, then reads and discards.
func (b *blackhole) pipe(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !b.dropped.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestKeepaliveEndsStreamToPartitionedBroker: with the link's keepalive, a
// watch stream to a broker that silently stopped answering fails instead of
// waiting forever. (Ping interval 10s, gRPC's floor; timeout 1s; the test
// takes about 11s.)
func TestKeepaliveEndsStreamToPartitionedBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a keepalive interval")
	}
	f := newFixture(t)
	brokertest.WaitFor(t, 10*time.Second, "registration", func() bool { return f.broker.Registration(f.inst) != nil })
	hole := newBlackhole(t, f.broker.Addr())
	conn, err := grpc.NewClient(hole.lis.Addr().String(),
		append(dialOptions(10*time.Second, time.Second), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	stream, err := allotv1.NewNodeServiceClient(conn).WatchNode(ctx, &allotv1.WatchNodeRequest{InstanceId: f.inst})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("first snapshot: %v", err)
	}
	hole.dropped.Store(true)
	_, err = stream.Recv()
	if ctx.Err() != nil {
		t.Fatalf("stream still waiting after %v with the broker partitioned away", 45*time.Second)
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("stream ended with %v, want Unavailable (keepalive timeout)", err)
	}
}
