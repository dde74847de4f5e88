package otlp_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/allotnet/allot/cni/plugin/otlp"
	"github.com/allotnet/allot/internal/telemetry/telemetrytest"
	"github.com/allotnet/allot/internal/telemetry/traceconf"
)

// twoSpans makes the plugin's pair: a command span and a failed call
// under it.
func twoSpans(tr *otlp.Tracer) (root, call *otlp.Span) {
	root = tr.Start(nil, "allot CNI ADD", otlp.KindClient, "cni.container_id", "abc", "cni.ifname", "eth0")
	call = tr.Start(root, "allot.v1.CNIService/Add", otlp.KindClient)
	call.SetError("agent unreachable")
	call.End()
	root.End()
	return root, call
}

// TestExportToACollector: the spans reach a real OTLP/gRPC receiver with
// the service name, the resource's and spans' attributes, and the call
// under the command in one trace, whose context the call's traceparent
// names.
func TestExportToACollector(t *testing.T) {
	rcv, err := telemetrytest.NewReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	cfg, err := traceconf.TraceConfigFromEnv(env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint(), "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=secret",
	}), "allot")
	if err != nil {
		t.Fatal(err)
	}
	tr := otlp.New(cfg, "test")
	root, call := twoSpans(tr)
	if err := tr.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) != 2 {
		t.Fatalf("collector got %d spans, want 2: %+v", len(spans), spans)
	}
	byName := map[string]telemetrytest.Span{}
	for _, s := range spans {
		byName[s.Name] = s
		if s.Service != "allot" {
			t.Errorf("span %s of service %q, want allot", s.Name, s.Service)
		}
	}
	r, c := byName["allot CNI ADD"], byName["allot.v1.CNIService/Add"]
	if r.ParentSpanID != "" || c.ParentSpanID != r.SpanID || c.TraceID != r.TraceID {
		t.Errorf("command %+v, call %+v: want the call under the command, one trace", r, c)
	}
	if r.Attributes["cni.container_id"] != "abc" || r.Attributes["cni.ifname"] != "eth0" {
		t.Errorf("command span attributes %v", r.Attributes)
	}
	if want := "00-" + c.TraceID + "-" + c.SpanID + "-01"; call.Traceparent() != want {
		t.Errorf("call's traceparent %q, want %q", call.Traceparent(), want)
	}
	if !r.End.After(r.Start) || r.End.Before(c.End) {
		t.Errorf("times: command %v…%v, call %v…%v", r.Start, r.End, c.Start, c.End)
	}
	_ = root
}

// TestSampling: a root span the configured sampler drops is neither
// exported nor marked sampled in the context sent on.
func TestSampling(t *testing.T) {
	for _, sampler := range []string{"always_off", "parentbased_always_off", "traceidratio"} {
		rcv, err := telemetrytest.NewReceiver()
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := traceconf.TraceConfigFromEnv(env(map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.Endpoint(), "OTEL_TRACES_SAMPLER": sampler, "OTEL_TRACES_SAMPLER_ARG": "0",
		}), "allot")
		if err != nil {
			t.Fatal(err)
		}
		tr := otlp.New(cfg, "test")
		_, call := twoSpans(tr)
		if err := tr.Flush(t.Context()); err != nil {
			t.Errorf("%s: %v", sampler, err)
		}
		if n := len(rcv.Spans()); n != 0 || !strings.HasSuffix(call.Traceparent(), "-00") {
			t.Errorf("%s: %d spans exported, traceparent %s; want none, not sampled", sampler, n, call.Traceparent())
		}
		rcv.Close()
	}
}

// TestExportFailures: a collector that isn't there or refuses TLS costs an
// error, promptly, not a hang.
func TestExportFailures(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	tr := otlp.New(traceconf.TraceConfig{Endpoint: "http://" + addr, Insecure: true, ServiceName: "allot"}, "test")
	twoSpans(tr)
	start := time.Now()
	if err := tr.Flush(t.Context()); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("export to nobody: %v after %v, want an error at once", err, time.Since(start))
	}
	// A plaintext collector, addressed with TLS.
	rcv, err := telemetrytest.NewReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	host := strings.TrimPrefix(rcv.Endpoint(), "http://")
	tr = otlp.New(traceconf.TraceConfig{Endpoint: "https://" + host, ServiceName: "allot", Timeout: 2 * time.Second}, "test")
	twoSpans(tr)
	if err := tr.Flush(t.Context()); err == nil {
		t.Error("TLS to a plaintext collector succeeded")
	}
}

// TestExportOverTLS: with https:// and OTEL_EXPORTER_OTLP_CERTIFICATE the
// collector's certificate is verified against that CA.
func TestExportOverTLS(t *testing.T) {
	certPEM, keyPEM := selfSigned(t)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	rcv := &recorder{}
	g := grpc.NewServer(grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	collectortrace.RegisterTraceServiceServer(g, rcv)
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
	cfg, err := traceconf.TraceConfigFromEnv(env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "https://localhost:" + port, "OTEL_EXPORTER_OTLP_CERTIFICATE": ca,
	}), "allot")
	if err != nil {
		t.Fatal(err)
	}
	tr := otlp.New(cfg, "test")
	twoSpans(tr)
	if err := tr.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if rcv.spans() != 2 {
		t.Errorf("collector got %d spans over TLS, want 2", rcv.spans())
	}
	// Without the CA, the same collector is not trusted.
	cfg.CAFile = ""
	tr = otlp.New(cfg, "test")
	twoSpans(tr)
	if err := tr.Flush(t.Context()); err == nil {
		t.Error("export to a collector with an unknown CA succeeded")
	}
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
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
