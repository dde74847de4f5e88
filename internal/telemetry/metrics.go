// Package telemetry is what the broker and the agent share to be observed:
// an OpenTelemetry meter provider read by a Prometheus exporter, an OTLP
// trace exporter configured the way every OpenTelemetry SDK is (the
// OTEL_* environment, read in main), and a small read-only HTTP listener
// for /metrics.
package telemetry

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Metrics is an OpenTelemetry meter provider whose instruments are read by
// a Prometheus exporter into a registry of its own (not the global one, so
// several agents in one process — the burst benchmark — don't collide).
type Metrics struct {
	provider *sdkmetric.MeterProvider
	handler  http.Handler
}

// NewMetrics builds the provider and its /metrics handler.
func NewMetrics() (*Metrics, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	return &Metrics{
		provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)),
		handler:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
	}, nil
}

// Meter returns a meter for the named instrumentation scope.
func (m *Metrics) Meter(name string) metric.Meter { return m.provider.Meter(name) }

// Provider returns the meter provider, for instrumentation libraries
// (otelgrpc) that take one.
func (m *Metrics) Provider() metric.MeterProvider { return m.provider }

// Handler serves the Prometheus text format.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Shutdown stops the provider.
func (m *Metrics) Shutdown(ctx context.Context) error { return m.provider.Shutdown(ctx) }
