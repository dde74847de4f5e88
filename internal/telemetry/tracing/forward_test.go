package tracing_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/allotnet/allot/internal/telemetry/telemetrytest"
	"github.com/allotnet/allot/internal/telemetry/traceconf"
	"github.com/allotnet/allot/internal/telemetry/tracing"
)

// pluginSpans is what a CNI plugin hands the agent: one resource of
// service "allot" with one span named name.
func pluginSpans(name string) []*tracepb.ResourceSpans {
	var tid [16]byte
	var sid [8]byte
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	now := uint64(time.Now().UnixNano())
	return []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name",
			Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "allot"}}}}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId: tid[:], SpanId: sid[:], Name: name, StartTimeUnixNano: now, EndTimeUnixNano: now + 1000,
		}}}},
	}}
}

// TestForwarderSharesTheExporter: forwarded spans reach the process's
// collector with their own resource, beside the process's own spans, and
// Shutdown sends what is still queued.
func TestForwarderSharesTheExporter(t *testing.T) {
	rcv, tr := telemetrytest.AgentTracing(t)
	_, own := tr.Provider().Tracer("t").Start(t.Context(), "own")
	own.End()
	f := tr.Forwarder()
	if f == nil || tr.Forwarder() != f {
		t.Fatal("Forwarder: want one, the same on every call")
	}
	for range 3 {
		if err := f.Forward(pluginSpans("allot CNI ADD")); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, s := range rcv.Spans() {
		got[s.Service+" "+s.Name]++
	}
	if got["allot allot CNI ADD"] != 3 || got["allot-agent own"] != 1 {
		t.Errorf("collector got %v, want 3 forwarded and the agent's own", got)
	}
	if err := f.Forward(pluginSpans("late")); err == nil {
		t.Error("Forward after Shutdown took the spans")
	}
}

// TestForwarderOff: a process that exports nothing has no Forwarder.
func TestForwarderOff(t *testing.T) {
	tr, err := tracing.NewTracing(t.Context(), traceconf.TraceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if f := tr.Forwarder(); f != nil {
		t.Errorf("Forwarder with tracing off: %v, want nil", f)
	}
}

// stuckCollector answers no export until the test ends.
type stuckCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	release chan struct{}
}

func (c *stuckCollector) Export(ctx context.Context, _ *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	select {
	case <-c.release:
	case <-ctx.Done():
	}
	return nil, errors.New("stuck")
}

// TestForwarderNeverBlocks: with a collector that never answers, Forward
// still returns at once (dropping spans once its queue is full, with
// ErrForwardQueueFull), and Shutdown is bounded by its context.
func TestForwarderNeverBlocks(t *testing.T) {
	col := &stuckCollector{release: make(chan struct{})}
	g := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(g, col)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis) //nolint:errcheck // returns when stopped
	defer g.Stop()
	defer close(col.release)
	tr, err := tracing.NewTracing(t.Context(), traceconf.TraceConfig{Endpoint: "http://" + lis.Addr().String(),
		Insecure: true, ServiceName: "allot-agent", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f := tr.Forwarder()
	full := 0
	start := time.Now()
	for range 3000 {
		err := f.Forward(pluginSpans("x"))
		switch {
		case errors.Is(err, tracing.ErrForwardQueueFull):
			full++
		case err != nil:
			t.Fatal(err)
		}
	}
	// Generous for a loaded machine: 3,000 channel sends.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("3000 Forwards took %v", d)
	}
	if full == 0 {
		t.Error("3000 exports queued behind a stuck collector, none dropped: the queue is unbounded")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start = time.Now()
	_ = tr.Shutdown(ctx)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Shutdown with a stuck collector took %v, want about its context's 500ms", d)
	}
}

// tlsCollector records the spans it is sent over TLS.
type tlsCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu sync.Mutex
	n  int
}

func (c *tlsCollector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			c.n += len(ss.GetSpans())
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// TestForwardOverTLS: a collector that requires TLS, verified against
// OTEL_EXPORTER_OTLP_CERTIFICATE's CA, gets the forwarded spans: the
// plugin, which has no TLS of its own, reaches it through the agent.
func TestForwardOverTLS(t *testing.T) {
	certPEM, keyPEM := selfSigned(t)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	col := &tlsCollector{}
	g := grpc.NewServer(grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	collectortrace.RegisterTraceServiceServer(g, col)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis) //nolint:errcheck // returns when stopped
	defer g.Stop()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	cfg, err := traceconf.TraceConfigFromEnv(func(k string) (string, bool) {
		v, ok := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://localhost:" + port, "OTEL_EXPORTER_OTLP_CERTIFICATE": ca}[k]
		return v, ok
	}, "allot-agent")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tracing.NewTracing(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Forwarder().Forward(pluginSpans("allot CNI ADD")); err != nil {
		t.Fatal(err)
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if col.n != 1 {
		t.Errorf("TLS collector got %d spans, want 1", col.n)
	}
}

// selfSigned returns a certificate for localhost and its key, in PEM.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "collector"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}
