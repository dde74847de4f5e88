package plugin

import (
	"time"

	"github.com/allotnet/allot/agent/cniserver/cniwire"
	"github.com/allotnet/allot/cni/plugin/otlp"
)

// call makes one call to the agent on its socket, on the plugin's own wire
// (cniwire: one connection, one write, two reads; no gRPC client to start).
// A socket nobody serves fails at once (Unavailable); an agent that accepts
// but never answers (frozen) costs ConnectTimeout; the deadline bounds
// the whole call and is the agent's deadline too. With a tracer, the call
// is a client span under the command's (parent), named as gRPC names the
// method, and its W3C trace context goes to the agent, whose spans join
// the trace. (The command's span is a root, so there is no baggage to
// carry.)
func (p *Plugin) call(deadline time.Time, parent *otlp.Span, socket string, m cniwire.Method, body []byte) ([]byte, error) {
	req := cniwire.Request{Method: m, Body: body}
	if p.Tracer == nil {
		return cniwire.CallBy(deadline, socket, ConnectTimeout, req)
	}
	p.socket = socket
	span := p.Tracer.Start(parent, m.FullName(), otlp.KindClient, "rpc.system", "allot-cni", "rpc.method", m.String())
	defer span.End()
	req.Headers = map[string]string{"traceparent": span.Traceparent()}
	res, err := cniwire.CallBy(deadline, socket, ConnectTimeout, req)
	if err != nil {
		span.SetError(err.Error())
		p.agentDown = agentUnreachable(err)
	}
	return res, err
}
