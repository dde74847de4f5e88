package server

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// The call log: one record per finished call, at the level its code calls
// for (codeToLevel), with go-grpc-middleware's field names. The record is
// built only when that level is enabled: a large cluster's agents make
// thousands of successful calls a second (heartbeats, reports), logged at
// Debug, and the default level drops them before any field is formatted.

func unaryCallLog(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		logCall(ctx, log, info.FullMethod, "unary", start, err)
		return resp, err
	}
}

func streamCallLog(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		start := time.Now()
		err := handler(srv, ss)
		kind := "server_stream"
		switch {
		case info.IsClientStream && info.IsServerStream:
			kind = "bidi_stream"
		case info.IsClientStream:
			kind = "client_stream"
		}
		logCall(ss.Context(), log, info.FullMethod, kind, start, err)
		return err
	}
}

// logCall logs one finished call if its level is enabled.
func logCall(ctx context.Context, log *slog.Logger, fullMethod, kind string, start time.Time, err error) {
	code := status.Code(err)
	level := codeToLevel(code)
	if code == codes.Unavailable && isBusy(err) {
		// Summed up by the gate: while the broker is busy there are many.
		level = slog.LevelDebug
	}
	if !log.Enabled(ctx, level) {
		return
	}
	service, method, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs, slog.String("protocol", "grpc"), slog.String("grpc.component", "server"),
		slog.String("grpc.service", service), slog.String("grpc.method", method), slog.String("grpc.method_type", kind))
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		attrs = append(attrs, slog.String("peer.address", p.Addr.String()))
	}
	attrs = append(attrs, slog.String("grpc.start_time", start.Format(time.RFC3339)))
	if d, ok := ctx.Deadline(); ok {
		attrs = append(attrs, slog.String("grpc.request.deadline", d.Format(time.RFC3339)))
	}
	attrs = append(attrs, slog.String("grpc.code", code.String()))
	if err != nil {
		attrs = append(attrs, slog.String("grpc.error", err.Error()))
	}
	attrs = append(attrs, slog.Float64("grpc.time_ms", float64(time.Since(start).Microseconds())/1000))
	log.LogAttrs(ctx, level, "finished call", attrs...)
}
