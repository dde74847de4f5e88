package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Listener is a small HTTP server for read-only endpoints (/metrics,
// /healthz). Prometheus scrapes it from elsewhere in the cluster, so it may
// bind the node's or the pod's IP; nothing it serves changes state.
type Listener struct {
	srv *http.Server
	lis net.Listener
}

// Listen binds addr and serves h on it once Serve is called.
func Listen(addr string, h http.Handler) (*Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return &Listener{
		srv: &http.Server{Handler: readOnly(h), ReadHeaderTimeout: 5 * time.Second},
		lis: lis,
	}, nil
}

// readOnly refuses every method but GET and HEAD, whatever h routes.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read-only endpoint", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// MetricsHandler routes GET /metrics to m, and /healthz to ok when it is
// not nil (200 while ok returns true, else 503).
func MetricsHandler(m *Metrics, ok func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	if ok != nil {
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
			if !ok() {
				http.Error(w, "not ready", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok\n"))
		})
	}
	return mux
}

// Addr is the bound address.
func (l *Listener) Addr() string { return l.lis.Addr().String() }

// Serve serves until Shutdown.
func (l *Listener) Serve() error {
	if err := l.srv.Serve(l.lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", l.lis.Addr(), err)
	}
	return nil
}

// Shutdown stops serving, letting requests in flight finish until ctx ends.
func (l *Listener) Shutdown(ctx context.Context) error { return l.srv.Shutdown(ctx) }
