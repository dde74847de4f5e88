package etcdembed

import (
	"context"
	"log/slog"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Sampling of etcd's log lines: of the lines with one level and message,
// the first samplePerTick in each sampleTick are written, then every
// sampleThereafter-th. When etcd is slow under load its client warns once
// for every call it retries; with thousands of agents' calls waiting on
// etcd, writing each warning made them queue again, on the log's lock.
const (
	sampleTick       = time.Second
	samplePerTick    = 10
	sampleThereafter = 1000
)

// NewZapLogger returns a zap logger for etcd's server and client that
// forwards warnings and errors to lg, sampled, and drops the rest: etcd is
// chatty at info and its logs are not ours. A nil lg gives a no-op logger.
func NewZapLogger(lg *slog.Logger) *zap.Logger {
	if lg == nil {
		return zap.NewNop()
	}
	core := &slogCore{lg: lg.With("component", "etcd"), min: zapcore.WarnLevel}
	return zap.New(zapcore.NewSamplerWithOptions(core, sampleTick, samplePerTick, sampleThereafter))
}

// slogCore is a zapcore.Core writing to a slog.Logger.
type slogCore struct {
	lg     *slog.Logger
	min    zapcore.Level
	fields []zapcore.Field
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= c.min }

func (c *slogCore) With(fs []zapcore.Field) zapcore.Core {
	n := &slogCore{lg: c.lg, min: c.min}
	n.fields = append(append(n.fields, c.fields...), fs...)
	return n
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fs {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields)+1)
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	c.lg.LogAttrs(context.Background(), slogLevel(e.Level), e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l >= zapcore.ErrorLevel:
		return slog.LevelError
	case l >= zapcore.WarnLevel:
		return slog.LevelWarn
	case l >= zapcore.InfoLevel:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}
