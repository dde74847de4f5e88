package telemetrytest

import (
	"context"
	"encoding/hex"
	"net"
	"sync"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// Span is one span a Receiver got, flattened.
type Span struct {
	Service      string
	Name         string
	TraceID      string
	SpanID       string
	ParentSpanID string
	// Links are the trace IDs of the spans this one links to.
	Links      []string
	LinkSpans  []string
	Attributes map[string]string
	// Start and End are the span's times, as the process that made it
	// read its clock.
	Start, End time.Time
}

// Receiver is an in-process OTLP/gRPC collector that keeps every span it
// is sent, for tests that follow a request across processes.
type Receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	srv *grpc.Server
	lis net.Listener

	mu    sync.Mutex
	spans []Span
}

// NewReceiver listens on a free loopback port.
func NewReceiver() (*Receiver, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{srv: grpc.NewServer(), lis: lis}
	collectortrace.RegisterTraceServiceServer(r.srv, r)
	go func() { _ = r.srv.Serve(lis) }()
	return r, nil
}

// Endpoint is the URL to put in OTEL_EXPORTER_OTLP_ENDPOINT.
func (r *Receiver) Endpoint() string { return "http://" + r.lis.Addr().String() }

// Close stops the receiver.
func (r *Receiver) Close() { r.srv.Stop() }

// Export implements the OTLP trace service.
func (r *Receiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, flatten(service, s))
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func flatten(service string, s *tracepb.Span) Span {
	out := Span{
		Service: service, Name: s.GetName(),
		TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
		Attributes: map[string]string{},
		Start:      time.Unix(0, int64(s.GetStartTimeUnixNano())),
		End:        time.Unix(0, int64(s.GetEndTimeUnixNano())),
	}
	if p := s.GetParentSpanId(); len(p) > 0 {
		out.ParentSpanID = hex.EncodeToString(p)
	}
	for _, l := range s.GetLinks() {
		out.Links = append(out.Links, hex.EncodeToString(l.GetTraceId()))
		out.LinkSpans = append(out.LinkSpans, hex.EncodeToString(l.GetSpanId()))
	}
	for _, kv := range s.GetAttributes() {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			out.Attributes[kv.GetKey()] = v.GetStringValue()
		default:
			out.Attributes[kv.GetKey()] = v.String()
		}
	}
	return out
}

// Spans returns what was received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}
