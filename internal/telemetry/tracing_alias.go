package telemetry

import "github.com/allotnet/allot/internal/telemetry/tracing"

// The tracing half of telemetry lives in its own package, so the CNI
// plugin, which exports spans but serves no metrics, does not link the
// Prometheus exporter (it runs once per pod, and every init counts).
// These names keep the daemons' imports as they were.
type (
	TraceConfig = tracing.TraceConfig
	Tracing     = tracing.Tracing
)

var (
	TraceConfigFromEnv = tracing.TraceConfigFromEnv
	NewTracing         = tracing.NewTracing
	Install            = tracing.Install
	Propagator         = tracing.Propagator
)
