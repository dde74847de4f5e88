package metrics

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// EtcdDialOptions time every unary etcd request (reads, transactions, lease
// grants and keep-alives) by method and gRPC code; pass them in the etcd
// client's DialOptions. Watches are streams that live for the connection's
// life and are not timed.
func EtcdDialOptions(m metric.Meter) ([]grpc.DialOption, error) {
	h, err := m.Float64Histogram("allot.broker.etcd.duration", metric.WithUnit("s"),
		metric.WithDescription("Time etcd took to answer one request, by method (KV/Range, KV/Txn, Lease/LeaseGrant…) and gRPC code"),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
	if err != nil {
		return nil, fmt.Errorf("etcd latency histogram: %w", err)
	}
	icpt := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		h.Record(context.WithoutCancel(ctx), time.Since(start).Seconds(), metric.WithAttributes(
			attribute.String("method", shortMethod(method)), attribute.String("code", status.Code(err).String())))
		return err
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(icpt)}, nil
}

// shortMethod turns /etcdserverpb.KV/Range into KV/Range.
func shortMethod(full string) string {
	svc, m := path.Split(full)
	svc = path.Base(svc)
	if i := strings.LastIndex(svc, "."); i >= 0 {
		svc = svc[i+1:]
	}
	return svc + "/" + m
}
