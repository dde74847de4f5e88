package otlp_test

import (
	"encoding/hex"
	"strings"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/allotnet/allot/cni/plugin/otlp"
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

// decode reads what Take returned with the generated types: the resource's
// attributes and the spans by name.
func decode(t *testing.T, b []byte) (map[string]string, map[string]*tracepb.Span) {
	t.Helper()
	req := &collectortrace.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(b, req); err != nil {
		t.Fatal(err)
	}
	res, spans := map[string]string{}, map[string]*tracepb.Span{}
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				spans[s.GetName()] = s
			}
		}
	}
	return res, spans
}

// TestTake: the spans come out as one export request with the service name
// and the resource's attributes, the call under the command in one trace
// whose context the call's traceparent names; a second Take has nothing.
func TestTake(t *testing.T) {
	cfg, err := traceconf.TraceConfigFromEnv(env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_RESOURCE_ATTRIBUTES": "k8s.node.name=n1",
	}), "allot")
	if err != nil {
		t.Fatal(err)
	}
	tr := otlp.New(cfg, "test")
	_, call := twoSpans(tr)
	res, spans := decode(t, tr.Take())
	if res["service.name"] != "allot" || res["k8s.node.name"] != "n1" || len(res) != 2 {
		t.Errorf("resource %v", res)
	}
	r, c := spans["allot CNI ADD"], spans["allot.v1.CNIService/Add"]
	if r == nil || c == nil || len(spans) != 2 {
		t.Fatalf("spans %v", spans)
	}
	if len(r.GetParentSpanId()) != 0 || string(c.GetParentSpanId()) != string(r.GetSpanId()) || string(c.GetTraceId()) != string(r.GetTraceId()) {
		t.Errorf("command %v, call %v: want the call under the command, one trace", r, c)
	}
	if want := "00-" + hex.EncodeToString(c.GetTraceId()) + "-" + hex.EncodeToString(c.GetSpanId()) + "-01"; call.Traceparent() != want {
		t.Errorf("call's traceparent %q, want %q", call.Traceparent(), want)
	}
	if r.GetEndTimeUnixNano() < c.GetEndTimeUnixNano() || c.GetStartTimeUnixNano() < r.GetStartTimeUnixNano() {
		t.Errorf("times: command %d…%d, call %d…%d", r.GetStartTimeUnixNano(), r.GetEndTimeUnixNano(),
			c.GetStartTimeUnixNano(), c.GetEndTimeUnixNano())
	}
	if b := tr.Take(); b != nil {
		t.Errorf("second Take: %d bytes, want nothing", len(b))
	}
}

// TestIDsDiffer: trace and span IDs are not reused across spans.
func TestIDsDiffer(t *testing.T) {
	tr := otlp.New(traceconf.TraceConfig{Endpoint: "http://x:4317", ServiceName: "allot"}, "test")
	seen := map[string]bool{}
	for range 1000 {
		tp := tr.Start(nil, "x", otlp.KindClient).Traceparent()
		trace, span := tp[3:35], tp[36:52]
		if seen[trace] || seen[span] || trace == strings.Repeat("0", 32) || span == strings.Repeat("0", 16) {
			t.Fatalf("traceparent %s repeats an ID or is zero", tp)
		}
		seen[trace], seen[span] = true, true
	}
}

// TestSampling: a root span the configured sampler drops is neither handed
// out nor marked sampled in the context sent on.
func TestSampling(t *testing.T) {
	for _, sampler := range []string{"always_off", "parentbased_always_off", "traceidratio"} {
		cfg, err := traceconf.TraceConfigFromEnv(env(map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_TRACES_SAMPLER": sampler, "OTEL_TRACES_SAMPLER_ARG": "0",
		}), "allot")
		if err != nil {
			t.Fatal(err)
		}
		tr := otlp.New(cfg, "test")
		_, call := twoSpans(tr)
		if b := tr.Take(); b != nil || !strings.HasSuffix(call.Traceparent(), "-00") {
			t.Errorf("%s: %d bytes handed out, traceparent %s; want none, not sampled", sampler, len(b), call.Traceparent())
		}
	}
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}
