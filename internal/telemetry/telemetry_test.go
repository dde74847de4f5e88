package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/allotnet/allot/internal/telemetry"
	"github.com/allotnet/allot/internal/telemetry/telemetrytest"
	"github.com/allotnet/allot/internal/telemetry/traceconf"
	"github.com/allotnet/allot/internal/telemetry/tracing"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestTraceConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want func(traceconf.TraceConfig) bool
		bad  string
	}{
		{name: "unset is off", env: nil, want: func(c traceconf.TraceConfig) bool { return !c.Enabled() && c.ServiceName == "svc" }},
		{name: "general endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"},
			want: func(c traceconf.TraceConfig) bool { return c.Enabled() && c.Insecure && c.Endpoint == "http://c:4317" }},
		{name: "traces endpoint wins", env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b:4317"},
			want: func(c traceconf.TraceConfig) bool { return c.Endpoint == "https://b:4317" && !c.Insecure }},
		{name: "disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_SDK_DISABLED": "true"},
			want: func(c traceconf.TraceConfig) bool { return !c.Enabled() }},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_TRACES_EXPORTER": "none"},
			want: func(c traceconf.TraceConfig) bool { return !c.Enabled() }},
		{name: "service, resource, headers, timeout, sampler", env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4317", "OTEL_SERVICE_NAME": "broker-a",
			"OTEL_RESOURCE_ATTRIBUTES": "k8s.pod.name=p%201,team=net", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=s3cr%3Dt",
			"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"},
			want: func(c traceconf.TraceConfig) bool {
				return c.ServiceName == "broker-a" && c.Attributes["k8s.pod.name"] == "p 1" && c.Headers["api-key"] == "s3cr=t" &&
					c.Timeout == 2500*time.Millisecond && c.Sampler == "parentbased_traceidratio" && c.SamplerArg == 0.25
			}},
		{name: "http protocol refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, bad: "grpc"},
		{name: "endpoint not a URL", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4317"}, bad: "want a URL"},
		{name: "bad sampler", env: map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}, bad: "OTEL_TRACES_SAMPLER"},
		{name: "bad ratio", env: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, bad: "ratio"},
		{name: "bad timeout", env: map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, bad: "milliseconds"},
		{name: "bad exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, bad: "otlp"},
		{name: "header without value is refused without echoing it", env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "token-abc"}, bad: "entry 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := traceconf.TraceConfigFromEnv(env(tc.env), "svc")
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.bad)
				}
				if strings.Contains(err.Error(), "token-abc") {
					t.Fatalf("error echoes a header: %v", err)
				}
				return
			}
			if err != nil || !tc.want(c) {
				t.Fatalf("config %+v, err %v", c, err)
			}
		})
	}
}

// TestTracingExportsToCollector sends a span through the configured
// exporter to an in-process collector and finds it there with its
// service name and resource.
func TestTracingExportsToCollector(t *testing.T) {
	rcv, err := telemetrytest.NewReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	cfg, err := traceconf.TraceConfigFromEnv(env(map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rcv.Endpoint(), "OTEL_SERVICE_NAME": "allot-test",
	}), "ignored")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tracing.NewTracing(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := tr.Provider().Tracer("t").Start(context.Background(), "outer")
	_, child := tr.Provider().Tracer("t").Start(ctx, "inner")
	child.End()
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) != 2 {
		t.Fatalf("collector got %d spans, want 2: %+v", len(spans), spans)
	}
	byName := map[string]telemetrytest.Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	in, out := byName["inner"], byName["outer"]
	if out.Service != "allot-test" || in.TraceID != out.TraceID || in.ParentSpanID != out.SpanID {
		t.Fatalf("spans not one trace of allot-test: %+v", spans)
	}
}

func TestTracingOffIsNoop(t *testing.T) {
	tr, err := tracing.NewTracing(context.Background(), traceconf.TraceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.Provider().Tracer("t").Start(context.Background(), "x")
	if span.SpanContext().IsValid() {
		t.Fatal("tracing off still makes real spans")
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestListenerIsReadOnly serves metrics on an address a scraper elsewhere
// would use, and refuses anything but reads.
func TestListenerIsReadOnly(t *testing.T) {
	m, err := telemetry.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	c, _ := m.Meter("t").Int64Counter("allot.test.things")
	c.Add(context.Background(), 2, metric.WithAttributes())
	ready := false
	l, err := telemetry.Listen("127.0.0.1:0", telemetry.MetricsHandler(m, func() bool { return ready }))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = l.Serve() }()
	defer l.Shutdown(context.Background())
	base := "http://" + l.Addr()

	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "allot_test_things_total 2") {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	if code, _ := get("/healthz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/healthz before ready: %d", code)
	}
	ready = true
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz when ready: %d", code)
	}
	if code, _ := get("/v1/pods"); code != 404 {
		t.Fatalf("/v1/pods on the metrics listener: %d", code)
	}
	resp, err := http.Post(base+"/metrics", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /metrics: %d", resp.StatusCode)
	}
}

// TestRecorderExportedNames checks the replay gives the exporter's names:
// counters get _total, units become suffixes, histograms get their series.
func TestRecorderExportedNames(t *testing.T) {
	r := telemetrytest.NewRecorder()
	_, _ = r.Int64Counter("allot.x.calls")
	_, _ = r.Float64Histogram("allot.x.duration", metric.WithUnit("s"))
	_, _ = r.Int64ObservableGauge("allot.x.level")
	fams, err := telemetrytest.Exported(r.Instruments())
	if err != nil {
		t.Fatal(err)
	}
	for name, series := range map[string]string{
		"allot_x_calls_total": "allot_x_calls_total", "allot_x_duration_seconds": "allot_x_duration_seconds_bucket",
		"allot_x_level": "allot_x_level",
	} {
		f, ok := fams[name]
		if !ok || !strings.Contains(strings.Join(f.Series, " "), series) {
			t.Errorf("family %s (series %s) missing: %+v", name, series, fams)
		}
	}
}
