package plugin

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/allotnet/allot/agent/cniserver/cniwire"
)

// propagator carries the command's trace context to the agent: W3C trace
// context and baggage, as allot's processes carry it between each other
// (internal/telemetry/tracing.Propagator, which the plugin does not link).
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// call makes one call to the agent on its socket, on the plugin's own wire
// (cniwire: one connection, one write, two reads; no gRPC client to start).
// A socket nobody serves fails at once (Unavailable); an agent that accepts
// but never answers (frozen) costs ConnectTimeout; ctx's deadline bounds
// the whole call and is the agent's deadline too. With a tracer, the call
// is a client span under the command's, named as gRPC names the method,
// and its trace context goes to the agent, whose spans join the trace.
func (p *Plugin) call(ctx context.Context, socket string, m cniwire.Method, body []byte) ([]byte, error) {
	req := cniwire.Request{Method: m, Body: body}
	if p.Tracer == nil {
		return cniwire.Call(ctx, socket, ConnectTimeout, req)
	}
	ctx, span := p.Tracer.Tracer(tracerName).Start(ctx, m.FullName(), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("rpc.system", "allot-cni"), attribute.String("rpc.method", m.String())))
	defer span.End()
	req.Headers = map[string]string{}
	propagator.Inject(ctx, propagation.MapCarrier(req.Headers))
	res, err := cniwire.Call(ctx, socket, ConnectTimeout, req)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return res, err
}
