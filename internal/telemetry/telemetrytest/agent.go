package telemetrytest

import (
	"testing"

	"github.com/allotnet/allot/internal/telemetry/traceconf"
	"github.com/allotnet/allot/internal/telemetry/tracing"
)

// AgentTracing starts a Receiver, closed when the test ends, and the
// agent's tracing (service "allot-agent") exporting to it in plaintext.
// The caller shuts the tracing down, as its test needs.
func AgentTracing(t testing.TB) (*Receiver, *tracing.Tracing) {
	t.Helper()
	rcv, err := NewReceiver()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rcv.Close)
	tr, err := tracing.NewTracing(t.Context(), traceconf.TraceConfig{Endpoint: rcv.Endpoint(), Insecure: true, ServiceName: "allot-agent"})
	if err != nil {
		t.Fatal(err)
	}
	return rcv, tr
}
