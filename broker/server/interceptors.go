package server

import (
	"context"
	"crypto/tls"
	"log/slog"
	"runtime/debug"
	"slices"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/validator"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// serverOptions is the middleware every call passes, outermost first:
// OpenTelemetry (stats handler), the call log (calllog.go), recovery, the domain-error table,
// the caller's interceptors (unary, stream; the server adds its bound on
// the agents' calls, callGate, last of them), and validation right around
// the handler, so handlers and interceptors return plain wrapped errors and
// nothing else decides a code.
//
// Keepalive: agents ping every 30s (agent/brokerlink), also between
// streams, so a partitioned broker does not hold their watch streams open
// forever; the enforcement policy must allow that, or grpc-go's default (one
// ping per 5 minutes, none without a stream) answers with GOAWAY
// "too_many_pings". The server pings idle connections itself, so the streams
// of a vanished agent are let go too.
func serverOptions(log *slog.Logger, unary []grpc.UnaryServerInterceptor, stream []grpc.StreamServerInterceptor) []grpc.ServerOption {
	rec := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "panic in gRPC handler", "panic", p, "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error (the broker logged the details)")
	})
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		// Every node holds a connection open for its life; gRPC's
		// default 32 KiB read buffer per connection would cost a
		// 5,000-node cluster 160 MiB for messages that are mostly a few
		// hundred bytes. Larger ones are read through the small buffer
		// all the same; over TLS there is none (TLS); the write buffer is
		// borrowed from a pool for each flush.
		grpc.ReadBufferSize(ConnBufferSize),
		grpc.WriteBufferSize(ConnBufferSize),
		grpc.HeaderTableSize(HeaderTableSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime: KeepaliveMinTime, PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time: KeepaliveTime, Timeout: KeepaliveTimeout,
		}),
		grpc.StatsHandler(otelgrpc.NewServerHandler()),
		grpc.ChainUnaryInterceptor(slices.Concat(
			[]grpc.UnaryServerInterceptor{
				unaryCallLog(log),
				recovery.UnaryServerInterceptor(rec),
				unaryErrors,
			},
			unary,
			[]grpc.UnaryServerInterceptor{validator.UnaryServerInterceptor()},
		)...),
		grpc.ChainStreamInterceptor(slices.Concat(
			[]grpc.StreamServerInterceptor{
				streamCallLog(log),
				recovery.StreamServerInterceptor(rec),
				streamErrors,
			},
			stream,
			[]grpc.StreamServerInterceptor{validator.StreamServerInterceptor()},
		)...),
	}
}

// MaxRecvMsgSize bounds one request. The largest honest one, a usage report
// of a node at its limit, is a few hundred KiB.
const MaxRecvMsgSize = 1 << 20

// ConnBufferSize is each plaintext connection's read buffer, and the
// write buffer every connection borrows while it writes. A TLS connection
// has no read buffer of gRPC's own (TLS).
const ConnBufferSize = 4 << 10

// HeaderTableSize bounds the table of header fields each client may have
// the broker remember for its connection (HTTP/2's header compression),
// instead of the protocol's default 4 KiB. Every call an agent makes adds
// fields that change from call to call (its deadline, its trace context),
// so the table fills to whatever size it may take and holds it for the
// connection's life: 3.4 KiB for every node, 17 MiB of heap at 5,000 nodes.
// 1 KiB still holds the fields that stay (the method, the agent's token)
// between one call's changing fields and the next; a field that was pushed
// out is sent in full again, a few hundred bytes.
const HeaderTableSize = 1 << 10

// TLS is the server options that serve over TLS with cfg: the
// credentials, and no read buffer of gRPC's own. TLS already holds every
// record it reads until gRPC has taken all of it, so gRPC's buffer would
// only copy the records again, and it costs 4 KiB for each connection for
// the connection's whole life: every node keeps one open, 20 MiB of heap
// at 5,000 nodes (twice that in RSS with the collector's headroom).
func TLS(cfg *tls.Config) []grpc.ServerOption {
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(cfg)), grpc.ReadBufferSize(0)}
}

// codeToLevel keeps the steady stream of successful agent calls out of the
// default log, and the broker's own failures in it.
func codeToLevel(c codes.Code) slog.Level {
	switch c {
	case codes.OK, codes.Canceled:
		return slog.LevelDebug
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition,
		codes.ResourceExhausted, codes.Aborted, codes.OutOfRange, codes.Unauthenticated,
		codes.PermissionDenied, codes.DeadlineExceeded:
		return slog.LevelInfo
	case codes.Unavailable:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func unaryErrors(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	return resp, rpcerr.Status(err)
}

func streamErrors(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return rpcerr.Status(handler(srv, ss))
}
