package cniserver

import (
	"fmt"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/allotnet/allot/agent/cniserver/cniwire"
)

// maxPluginSpans bounds the spans of one MethodSpans call. The plugin
// sends two, its command's and its call's.
const maxPluginSpans = 16

// SpanSink exports spans the CNI plugin recorded, to the collector the
// agent's own spans go to. Forward must not block: it queues the spans, or
// drops them and says so with an error (a full queue, a stopped exporter).
type SpanSink interface {
	Forward(spans []*tracepb.ResourceSpans) error
}

// ExportPluginSpans makes the server take the plugin's finished spans
// (cniwire.MethodSpans) and hand them to sink. Without a sink, as when the
// agent exports no traces, the plugin is told its spans are dropped.
// Call it before serving.
func (s *Server) ExportPluginSpans(sink SpanSink) { s.spans = sink }

// takeSpans checks the plugin's spans (one OTLP ExportTraceServiceRequest,
// as it encoded them) and queues them for export. Nothing of a pod's call
// depends on it: it runs on its own connection, after the call, and
// whatever it refuses costs only the spans.
func (s *Server) takeSpans(body []byte) error {
	if s.spans == nil {
		return cniwire.Errorf(cniwire.FailedPrecondition, "this agent exports no traces: "+
			"set OTEL_EXPORTER_OTLP_ENDPOINT for the agent too, or unset it in the container runtime's environment")
	}
	if len(body) > cniwire.MaxSpans {
		return cniwire.Errorf(cniwire.ResourceExhausted, "spans of %d bytes, more than the %d the agent takes", len(body), cniwire.MaxSpans)
	}
	req := &collectortrace.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(body, req); err != nil {
		return cniwire.Errorf(cniwire.InvalidArgument, "spans are not an OTLP export request: %v", err)
	}
	if err := checkSpans(req.GetResourceSpans()); err != nil {
		return cniwire.Errorf(cniwire.InvalidArgument, "spans: %v", err)
	}
	if len(req.GetResourceSpans()) == 0 {
		return nil
	}
	if err := s.spans.Forward(req.GetResourceSpans()); err != nil {
		return cniwire.Errorf(cniwire.ResourceExhausted, "%v", err)
	}
	return nil
}

// checkSpans refuses what no plugin sends: more spans than it makes, and
// spans a collector could not place (IDs of the wrong size, no name).
func checkSpans(rss []*tracepb.ResourceSpans) error {
	n := 0
	for _, rs := range rss {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				if n++; n > maxPluginSpans {
					return fmt.Errorf("more than %d spans", maxPluginSpans)
				}
				if len(sp.GetTraceId()) != 16 || len(sp.GetSpanId()) != 8 || len(sp.GetParentSpanId()) != 0 && len(sp.GetParentSpanId()) != 8 {
					return fmt.Errorf("span %q has a trace, span or parent ID of the wrong size", sp.GetName())
				}
				if sp.GetName() == "" {
					return fmt.Errorf("a span has no name")
				}
			}
		}
	}
	return nil
}
