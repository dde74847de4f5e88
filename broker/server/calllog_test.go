package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// records keeps what a logger at Info was asked to log.
type records struct {
	mu   sync.Mutex
	list []slog.Record
}

func (r *records) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// TestCallLog: a call that fails is logged at its code's level with the
// method, the code and the error; one that succeeds is not logged at
// Info, and building nothing for it allocates nothing.
func TestCallLog(t *testing.T) {
	rs := &records{}
	icpt := unaryCallLog(slog.New(rs))
	info := &grpc.UnaryServerInfo{FullMethod: "/allot.v1.NodeService/Heartbeat"}
	ok := func(context.Context, any) (any, error) { return nil, nil }
	refused := func(context.Context, any) (any, error) {
		return nil, status.Error(codes.NotFound, "node i-1 is not registered")
	}
	failed := func(context.Context, any) (any, error) { return nil, errors.New("boom") }
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { _, _ = icpt(ctx, nil, info, ok) }); n != 0 {
		t.Errorf("a successful call's log costs %v allocations with Debug off, want 0", n)
	}
	_, _ = icpt(ctx, nil, info, refused)
	_, _ = icpt(ctx, nil, info, failed)
	if len(rs.list) != 2 {
		t.Fatalf("%d records, want the two failed calls", len(rs.list))
	}
	for i, want := range []struct {
		level slog.Level
		code  string
	}{{slog.LevelInfo, "NotFound"}, {slog.LevelError, "Unknown"}} {
		rec := rs.list[i]
		got := map[string]string{}
		rec.Attrs(func(a slog.Attr) bool { got[a.Key] = a.Value.String(); return true })
		if rec.Level != want.level || rec.Message != "finished call" || got["grpc.code"] != want.code ||
			got["grpc.service"] != "allot.v1.NodeService" || got["grpc.method"] != "Heartbeat" || got["grpc.error"] == "" {
			t.Errorf("record %d: %v %q %v; want level %v, code %s, the method and the error", i, rec.Level, rec.Message, got, want.level, want.code)
		}
	}
}
