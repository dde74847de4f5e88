package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/allotnet/allot/broker/metrics"
	"github.com/allotnet/allot/internal/telemetry"
	"github.com/allotnet/allot/internal/telemetry/tracing"
)

// observability is what lets operators see the broker: its metrics, served
// on --metrics-addr, and its traces, exported over OTLP when the
// OpenTelemetry environment names a collector.
type observability struct {
	metrics *telemetry.Metrics
	tracing *tracing.Tracing
	meter   metric.Meter
	scrape  *telemetry.Listener
	log     *slog.Logger
}

// startObservability builds the providers and installs them as the global
// ones, which the gRPC server's otelgrpc handler uses.
func startObservability(ctx context.Context, cfg config, log *slog.Logger) (*observability, error) {
	m, err := telemetry.NewMetrics()
	if err != nil {
		return nil, err
	}
	tr, err := tracing.NewTracing(ctx, cfg.trace)
	if err != nil {
		return nil, err
	}
	tracing.Install(tr)
	otel.SetMeterProvider(m.Provider())
	o := &observability{metrics: m, tracing: tr, meter: m.Meter(metrics.MeterName), log: log}
	if cfg.trace.Enabled() {
		log.Info("exporting traces", "endpoint", cfg.trace.Endpoint, "service", cfg.trace.ServiceName)
	}
	return o, nil
}

// serve starts the metrics listener when an address is configured. Besides
// /metrics it answers /healthz with 200 while the process runs (liveness:
// a member waiting for an etcd quorum is alive, and restarting it would
// not bring the quorum back) and /readyz with 200 while ready says the
// broker serves (readiness: it reaches etcd), else 503.
func (o *observability) serve(addr string, ready func() bool) error {
	if addr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("/", telemetry.MetricsHandler(o.metrics, func() bool { return true }))
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "not serving: etcd not reached (no quorum yet, or lost)", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	l, err := telemetry.Listen(addr, mux)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	o.scrape = l
	go func() {
		if err := l.Serve(); err != nil {
			o.log.Error("metrics listener stopped", "err", err)
		}
	}()
	o.log.Info("serving metrics", "addr", l.Addr())
	return nil
}

// close stops the listener and flushes the spans still buffered, bounded
// so a collector that is down cannot hold the stop.
func (o *observability) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if o.scrape != nil {
		_ = o.scrape.Shutdown(ctx)
	}
	if err := o.tracing.Shutdown(ctx); err != nil {
		o.log.Warn("traces not flushed", "err", err)
	}
	_ = o.metrics.Shutdown(ctx)
}
