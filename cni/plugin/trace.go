package plugin

import (
	"context"
	"fmt"

	"github.com/allotnet/allot/agent/cniserver/cniwire"
	"github.com/allotnet/allot/cni/cnispec"
	"github.com/allotnet/allot/cni/plugin/otlp"
)

// TraceScope is the instrumentation scope of the plugin's spans.
const TraceScope = "github.com/allotnet/allot/cni/plugin"

// span starts the command's span, the root of the trace the agent's and
// the broker's spans for this call join; end records the command's error.
// Without a tracer the span is nil and both are no-ops.
func (p *Plugin) span(verb string, args *cnispec.CmdArgs) (*otlp.Span, func(error)) {
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

// FlushSpans hands the command's finished spans to the agent, which
// exports them to its collector: one more call on the socket the command
// used (the default socket if it made none), within ctx. The plugin has no
// exporter of its own, so that it links no TLS. An error means the spans
// were dropped; the command's outcome is not affected either way, and
// when the command found no agent there is no second try.
func (p *Plugin) FlushSpans(ctx context.Context) error {
	if p.Tracer == nil {
		return nil
	}
	body := p.Tracer.Take()
	if body == nil {
		return nil
	}
	if p.agentDown {
		return fmt.Errorf("%d bytes of spans dropped: the agent did not answer the command", len(body))
	}
	if len(body) > cniwire.MaxSpans {
		return fmt.Errorf("%d bytes of spans dropped: more than the agent takes (%d)", len(body), cniwire.MaxSpans)
	}
	socket := p.socket
	if socket == "" {
		socket = DefaultAgentSocket
	}
	_, err := cniwire.Call(ctx, socket, ConnectTimeout, cniwire.Request{Method: cniwire.MethodSpans, Body: body})
	switch cniwire.CodeOf(err) {
	case cniwire.OK:
		return nil
	case cniwire.Unimplemented:
		return fmt.Errorf("spans dropped: the agent at %s does not take the plugin's spans (it is older than the plugin; upgrade it)", socket)
	}
	return fmt.Errorf("spans dropped: %s", cniwire.MessageOf(err))
}
