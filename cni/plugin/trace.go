package plugin

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/allotnet/allot/cni/plugin/otlp"
)

// TraceScope is the instrumentation scope of the plugin's spans.
const TraceScope = "github.com/allotnet/allot/cni/plugin"

// span starts the command's span, the root of the trace the agent's and
// the broker's spans for this call join; end records the command's error.
// Without a tracer the span is nil and both are no-ops.
func (p *Plugin) span(verb string, args *skel.CmdArgs) (*otlp.Span, func(error)) {
	if p.Tracer == nil {
		return nil, func(error) {}
	}
	span := p.Tracer.Start(nil, "allot CNI "+verb, otlp.KindClient,
		"cni.container_id", args.ContainerID, "cni.ifname", args.IfName)
	return span, func(err error) {
		if err != nil {
			span.SetError(err.Error())
		}
		span.End()
	}
}
