package tracing

import "github.com/allotnet/allot/internal/telemetry/traceconf"

// TraceConfig is where and how spans are exported (traceconf.TraceConfig).
type TraceConfig = traceconf.TraceConfig

// TraceConfigFromEnv reads the OpenTelemetry SDK environment
// (traceconf.TraceConfigFromEnv).
func TraceConfigFromEnv(lookup func(string) (string, bool), service string) (TraceConfig, error) {
	return traceconf.TraceConfigFromEnv(lookup, service)
}
