// Package tracing is allot's OpenTelemetry tracing: the OTLP exporter
// configured from the standard environment, and the propagator that
// carries trace context between processes.
package tracing

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/credentials"

	"github.com/allotnet/allot/internal/telemetry/traceconf"
)

// Propagator is how allot carries trace context between processes: W3C
// trace context and baggage, in gRPC metadata (broker link, CNI socket).
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Tracing is a tracer provider: an OTLP exporter behind a batch processor,
// or a no-op provider when the config exports nothing.
type Tracing struct {
	provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider
	client   otlptrace.Client // the exporter's connection to the collector

	fwdOnce sync.Once
	fwd     *Forwarder
}

// NewTracing builds the provider cfg describes. The exporter connects
// lazily, so a collector that is down costs dropped spans, never a failed
// start.
func NewTracing(ctx context.Context, cfg traceconf.TraceConfig, extra ...sdktrace.TracerProviderOption) (*Tracing, error) {
	if !cfg.Enabled() {
		return &Tracing{provider: noop.NewTracerProvider()}, nil
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(cfg.Endpoint)}
	switch {
	case cfg.Insecure:
		opts = append(opts, otlptracegrpc.WithInsecure())
	case cfg.CAFile != "":
		creds, err := credentials.NewClientTLSFromFile(cfg.CAFile, "")
		if err != nil {
			return nil, fmt.Errorf("OTLP collector CA %s: %w", cfg.CAFile, err)
		}
		opts = append(opts, otlptracegrpc.WithTLSCredentials(creds))
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
	}
	if cfg.Timeout > 0 {
		opts = append(opts, otlptracegrpc.WithTimeout(cfg.Timeout))
	}
	// The client is the exporter's, kept so that a Forwarder can send on
	// the same connection.
	client := otlptracegrpc.NewClient(opts...)
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter for %s: %w", cfg.Endpoint, err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}
	for k, v := range cfg.Attributes {
		if k != "service.name" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	popts := append([]sdktrace.TracerProviderOption{
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		sdktrace.WithSampler(sampler(cfg)),
	}, extra...)
	tp := sdktrace.NewTracerProvider(popts...)
	return &Tracing{provider: tp, sdk: tp, client: client}, nil
}

func sampler(cfg traceconf.TraceConfig) sdktrace.Sampler {
	switch cfg.Sampler {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(cfg.SamplerArg)
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SamplerArg))
	default:
		return sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
}

// Provider is the tracer provider to hand down.
func (t *Tracing) Provider() trace.TracerProvider { return t.provider }

// Forwarder is what exports other processes' spans (the CNI plugin's) to
// this process's collector, or nil when it exports nothing. It starts on
// the first call.
func (t *Tracing) Forwarder() *Forwarder {
	if t.client == nil {
		return nil
	}
	t.fwdOnce.Do(func() { t.fwd = newForwarder(t.client) })
	return t.fwd
}

// Shutdown flushes the spans still buffered, forwarded ones first, and
// stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	var ferr error
	t.fwdOnce.Do(func() {}) // no Forwarder starts after this
	if t.fwd != nil {
		ferr = t.fwd.close(ctx)
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return ferr
}

// Install makes t's provider and allot's propagator the process's global
// ones, which instrumentation libraries (otelgrpc on every gRPC client and
// server) use. Only main calls it.
func Install(t *Tracing) {
	otel.SetTracerProvider(t.Provider())
	otel.SetTextMapPropagator(Propagator())
}
