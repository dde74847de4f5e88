package cniserver

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/allotnet/allot/agent/cniserver/cniwire"
)

// sniffWait bounds how long a new connection may take to send its first
// bytes; every client sends them at once (the plugin its preamble, gRPC
// its HTTP/2 preface).
const sniffWait = 10 * time.Second

// Mux serves the CNI socket on both wires: connections that open with
// cniwire.Preamble (the plugin) are answered by the Server directly,
// every other one (gRPC's HTTP/2 preface) goes to the gRPC server, which
// has the same Server registered. One socket, one set of handlers, the
// socket's permissions guarding both.
type Mux struct {
	lis  net.Listener
	grpc *grpc.Server
	srv  *Server

	toGRPC   chan net.Conn
	done     chan struct{}
	stopOnce sync.Once
	calls    sync.WaitGroup // wire calls in flight

	mu    sync.Mutex
	conns map[net.Conn]struct{} // wire connections, closed by Stop
}

// NewMux returns a Mux serving lis (from Listen) with s, and g for gRPC
// clients; register s on g first.
func NewMux(lis net.Listener, g *grpc.Server, s *Server) *Mux {
	return &Mux{lis: lis, grpc: g, srv: s, toGRPC: make(chan net.Conn), done: make(chan struct{}),
		conns: map[net.Conn]struct{}{}}
}

// Serve accepts connections until GracefulStop or Stop, and returns nil
// then. A failed accept (out of file descriptors) is retried after a
// growing pause, as gRPC's own server does, rather than leaving the
// socket unserved; only a listener closed from elsewhere ends Serve with
// its error.
func (m *Mux) Serve() error {
	go func() { _ = m.grpc.Serve(&chanListener{m: m}) }()
	var pause time.Duration
	for {
		conn, err := m.lis.Accept()
		if err != nil {
			select {
			case <-m.done:
				return nil
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			m.srv.log.Warn("cni socket: accept failed; retrying", "err", err, "pause", pause)
			select {
			case <-time.After(pause):
			case <-m.done:
				return nil
			}
			continue
		}
		pause = 0
		go m.route(conn)
	}
}

// route reads a connection's first bytes and hands it to its wire.
func (m *Mux) route(conn net.Conn) {
	_ = conn.SetReadDeadline(time.Now().Add(sniffWait))
	head := make([]byte, len(cniwire.Preamble))
	n, err := io.ReadFull(conn, head)
	if err != nil && n == 0 {
		conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	if err == nil && string(head) == cniwire.Preamble {
		if !m.track(conn) {
			conn.Close()
			return
		}
		defer m.untrack(conn)
		m.srv.serveWire(conn)
		return
	}
	select {
	case m.toGRPC <- &prefixConn{Conn: conn, r: io.MultiReader(bytes.NewReader(head[:n]), conn)}:
	case <-m.done:
		conn.Close()
	}
}

func (m *Mux) track(conn net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.done:
		return false
	default:
	}
	m.conns[conn] = struct{}{}
	m.calls.Add(1)
	return true
}

func (m *Mux) untrack(conn net.Conn) {
	m.mu.Lock()
	delete(m.conns, conn)
	m.mu.Unlock()
	m.calls.Done()
}

// close stops accepting, on both wires; the socket file goes with the
// listener.
func (m *Mux) close() {
	m.stopOnce.Do(func() {
		m.mu.Lock()
		close(m.done)
		m.mu.Unlock()
		_ = m.lis.Close()
	})
}

// GracefulStop stops accepting and waits for the calls in flight on both
// wires to finish.
func (m *Mux) GracefulStop() {
	m.close()
	m.grpc.GracefulStop()
	m.calls.Wait()
}

// Stop stops accepting and closes every connection, calls in flight
// included.
func (m *Mux) Stop() {
	m.close()
	m.grpc.Stop()
	m.mu.Lock()
	for c := range m.conns {
		c.Close()
	}
	m.mu.Unlock()
	m.calls.Wait()
}

// chanListener is the gRPC server's listener: the connections route gave
// it.
type chanListener struct {
	m *Mux
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.m.toGRPC:
		return c, nil
	case <-l.m.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.m.close()
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.m.lis.Addr() }

// prefixConn is a connection whose first bytes were read already.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }
