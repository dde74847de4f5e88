package daemon

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the agent's own spans (the gRPC ones are otelgrpc's).
const tracerName = "github.com/allotnet/allot/agent"

// waiters holds the span contexts of the ADDs that hold no address yet,
// oldest first. An ADD that finds the pool empty waits for the broker, so
// the demand the broker link states and the delivery that ends the wait
// are made in the oldest waiting ADD's trace: one trace then runs from the
// plugin through the demand and the broker's EC2 calls (linked to the
// demand) back to the ADD's answer.
type waiters struct {
	mu    sync.Mutex
	spans []*trace.SpanContext
}

// add records sc (if valid) and returns the function that forgets it.
func (w *waiters) add(sc trace.SpanContext) func() {
	if !sc.IsValid() {
		return func() {}
	}
	e := &sc
	w.mu.Lock()
	w.spans = append(w.spans, e)
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for i, s := range w.spans {
			if s == e {
				w.spans = append(w.spans[:i], w.spans[i+1:]...)
				return
			}
		}
	}
}

// oldest is the span context of the ADD waiting longest, or an invalid one.
func (w *waiters) oldest() trace.SpanContext {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.spans) == 0 {
		return trace.SpanContext{}
	}
	return *w.spans[0]
}

// tracer returns the agent's tracer: from Deps, else the process's global
// provider (allot-agent installs the OTLP one).
func (a *Agent) tracer() trace.Tracer {
	if a.deps.Tracer != nil {
		return a.deps.Tracer.Tracer(tracerName)
	}
	return otel.GetTracerProvider().Tracer(tracerName)
}

// traceDelivery is called just before delivered addresses join the pool.
// It returns the function that records, in the trace of the ADD waiting
// longest before they joined, that they did: from since (when the agent
// began confirming them with IMDS) to now. The ADD is picked first because
// the addresses wake the waiting ADDs, and the one they serve may have its
// answer and be off the list before the span is made.
func (a *Agent) traceDelivery() func(eniID string, added int, since time.Time) {
	sc := a.waiting.oldest()
	return func(eniID string, added int, since time.Time) {
		if !sc.IsValid() {
			return
		}
		ctx := trace.ContextWithSpanContext(context.Background(), sc)
		_, span := a.tracer().Start(ctx, "allot deliver", trace.WithTimestamp(since),
			trace.WithAttributes(attribute.String("allot.eni", eniID), attribute.Int("allot.added", added)))
		span.End()
	}
}
