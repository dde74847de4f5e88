package plugin

import (
	"fmt"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/allotnet/allot/internal/telemetry/tracing"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// dial opens the one connection this exec uses. The socket is root-only
// (0600), so plaintext on it is as private as the filesystem. NewClient
// does not connect yet; the first call does, and fails fast (no
// wait-for-ready) when nothing listens, so a down agent costs no time. An
// agent that accepts but never answers (frozen) costs ConnectTimeout.
// With a tracer, each call carries the command's trace context (W3C
// traceparent in the gRPC metadata), so the agent's spans join its trace.
func (p *Plugin) dial(socket string) (allotv1.CNIServiceClient, func() error, error) {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: ConnectTimeout}),
	}
	if p.Tracer != nil {
		opts = append(opts, grpc.WithStatsHandler(otelgrpc.NewClientHandler(
			otelgrpc.WithTracerProvider(p.Tracer), otelgrpc.WithPropagators(tracing.Propagator()))))
	}
	conn, err := grpc.NewClient("unix://"+socket, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("create agent client for %s: %w", socket, err)
	}
	return allotv1.NewCNIServiceClient(conn), conn.Close, nil
}
