package etcdembed

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
)

// countHandler counts the records it is given, by message.
type countHandler struct {
	mu    sync.Mutex
	byMsg map[string]int
	attrs []slog.Attr
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byMsg[r.Message]++
	return nil
}
func (h *countHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attrs = append(h.attrs, as...)
	return h
}
func (h *countHandler) WithGroup(string) slog.Handler { return h }

// TestZapLoggerSamples: a storm of one warning, as etcd's client gives when
// it retries thousands of calls, reaches the broker's log a handful of
// times; other messages, and errors, still get through; info is dropped.
func TestZapLoggerSamples(t *testing.T) {
	h := &countHandler{byMsg: map[string]int{}}
	zl := NewZapLogger(slog.New(h))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				zl.Warn("retrying of unary invoker failed")
			}
		})
	}
	wg.Wait()
	for i := range 5 {
		zl.Warn(fmt.Sprintf("other warning %d", i))
	}
	zl.Error("an error")
	zl.Info("chatter")

	h.mu.Lock()
	defer h.mu.Unlock()
	// 8,000 in well under the sampling second (a slow machine may cross
	// into a second tick: up to 10 more, and the 1,000th of each).
	if n := h.byMsg["retrying of unary invoker failed"]; n < samplePerTick || n > 2*samplePerTick+8 {
		t.Errorf("the repeated warning was written %d times, want %d to %d", n, samplePerTick, 2*samplePerTick+8)
	}
	for i := range 5 {
		if n := h.byMsg[fmt.Sprintf("other warning %d", i)]; n != 1 {
			t.Errorf("other warning %d written %d times, want 1", i, n)
		}
	}
	if h.byMsg["an error"] != 1 || h.byMsg["chatter"] != 0 {
		t.Errorf("error written %d times (want 1), info %d (want 0)", h.byMsg["an error"], h.byMsg["chatter"])
	}
	var component bool
	for _, a := range h.attrs {
		component = component || (a.Key == "component" && a.Value.String() == "etcd")
	}
	if !component {
		t.Errorf("etcd's lines carry no component=etcd: %v", h.attrs)
	}
}
