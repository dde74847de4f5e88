package otlp_test

import (
	"context"
	"sync"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
)

// recorder is a collector that counts the spans it is sent.
type recorder struct {
	collectortrace.UnimplementedTraceServiceServer
	mu sync.Mutex
	n  int
}

func (r *recorder) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			r.n += len(ss.GetSpans())
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (r *recorder) spans() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}
