package cniservertest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/allotnet/allot/agent/cniserver"
)

// Agent is a CNI server on a temporary unix socket.
type Agent struct {
	// Socket is the socket path, under a short temporary dir (unix socket
	// paths are limited to 108 bytes, which t.TempDir can exceed).
	Socket string
	mux    *cniserver.Mux
	stop   sync.Once
}

// Serve serves b on a new socket until the test ends or Stop is called.
func Serve(t testing.TB, b cniserver.Backend) *Agent {
	t.Helper()
	dir, err := os.MkdirTemp("", "allot-t-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return ServeAt(t, filepath.Join(dir, "cni.sock"), b)
}

// ServeAt serves b on the socket at path until the test ends or Stop is
// called.
func ServeAt(t testing.TB, path string, b cniserver.Backend) *Agent {
	t.Helper()
	return serve(t, path, b, nil)
}

// ServeSpans is Serve for an agent that exports the plugin's spans to
// sink.
func ServeSpans(t testing.TB, b cniserver.Backend, sink cniserver.SpanSink) *Agent {
	t.Helper()
	dir, err := os.MkdirTemp("", "allot-t-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return serve(t, filepath.Join(dir, "cni.sock"), b, sink)
}

func serve(t testing.TB, path string, b cniserver.Backend, sink cniserver.SpanSink) *Agent {
	lis, err := cniserver.Listen(path)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	g := grpc.NewServer()
	srv := cniserver.New(b, nil)
	if sink != nil {
		srv.ExportPluginSpans(sink)
	}
	srv.Register(g)
	a := &Agent{Socket: path, mux: cniserver.NewMux(lis, g, srv)}
	go a.mux.Serve() //nolint:errcheck // returns when stopped
	t.Cleanup(a.Stop)
	return a
}

// Stop stops serving and removes the socket, as a dead agent leaves it.
func (a *Agent) Stop() {
	a.stop.Do(a.mux.Stop)
}
