package otlp

import (
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/allotnet/allot/internal/telemetry/traceconf"
)

// TestEncodingMatchesTheGeneratedTypes: every field this package writes
// decodes, with the OTLP generated types, as the SDK's exporter sends it.
func TestEncodingMatchesTheGeneratedTypes(t *testing.T) {
	tr := New(traceconf.TraceConfig{Endpoint: "http://x:4317", ServiceName: "allot"}, "scope")
	root := tr.Start(nil, "allot CNI DEL", KindClient, "cni.ifname", "eth0")
	call := tr.Start(root, "allot.v1.CNIService/Del", KindClient)
	call.SetError("boom")
	call.End()
	root.End()
	b := exportRequest([][2]string{{"service.name", "allot"}, {"k8s.node.name", "n1"}}, "scope", tr.ended)
	req := &collectortrace.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(b, req); err != nil {
		t.Fatal(err)
	}
	rs := req.GetResourceSpans()
	if len(rs) != 1 || len(rs[0].GetResource().GetAttributes()) != 2 || len(rs[0].GetScopeSpans()) != 1 {
		t.Fatalf("request %v", req)
	}
	ss := rs[0].GetScopeSpans()[0]
	if ss.GetScope().GetName() != "scope" || len(ss.GetSpans()) != 2 {
		t.Fatalf("scope spans %v", ss)
	}
	c, r := ss.GetSpans()[0], ss.GetSpans()[1]
	if c.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || c.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR ||
		c.GetStatus().GetMessage() != "boom" || len(c.GetEvents()) != 1 || c.GetEvents()[0].GetName() != "exception" {
		t.Errorf("failed call span %v", c)
	}
	if string(c.GetParentSpanId()) != string(r.GetSpanId()) || string(c.GetTraceId()) != string(r.GetTraceId()) ||
		len(r.GetParentSpanId()) != 0 || len(r.GetTraceId()) != 16 || len(r.GetSpanId()) != 8 {
		t.Errorf("ids: call %x/%x under %x, command %x/%x", c.GetTraceId(), c.GetSpanId(), c.GetParentSpanId(), r.GetTraceId(), r.GetSpanId())
	}
	if r.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_UNSET || r.GetFlags()&1 != 1 ||
		r.GetEndTimeUnixNano() < r.GetStartTimeUnixNano() || r.GetAttributes()[0].GetValue().GetStringValue() != "eth0" {
		t.Errorf("command span %v", r)
	}
}
