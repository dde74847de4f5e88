package plugin

import (
	"context"

	"github.com/containernetworking/cni/pkg/skel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

const tracerName = "github.com/allotnet/allot/cni/plugin"

// span starts the command's span, the root of the trace the agent's and
// the broker's spans for this call join; end records the command's error.
// Without a tracer both are no-ops.
func (p *Plugin) span(verb string, args *skel.CmdArgs) (context.Context, func(error)) {
	ctx := context.Background()
	if p.Tracer == nil {
		return ctx, func(error) {}
	}
	ctx, span := p.Tracer.Tracer(tracerName).Start(ctx, "allot CNI "+verb,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("cni.container_id", args.ContainerID), attribute.String("cni.ifname", args.IfName)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
