package executor_test

import (
	"context"
	"log/slog"

	"github.com/allotnet/allot/broker/planner"
)

// planLog is a log handler that hands every plan the engine logs
// ("planned", at debug, right before its actions are queued) to a
// function, and passes everything else on to the test's logger. Tests
// see exactly the plans the engine carries out, at the moment it does.
type planLog struct {
	next   slog.Handler
	onPlan func(planner.Plan)
}

// plansTo returns a logger that calls f with each plan the engine makes.
func plansTo(f func(planner.Plan)) *slog.Logger {
	return slog.New(&planLog{next: quiet().Handler(), onPlan: f})
}

func (h *planLog) Enabled(context.Context, slog.Level) bool { return true }

func (h *planLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "planned" {
		r.Attrs(func(a slog.Attr) bool {
			if p, ok := a.Value.Any().(planner.Plan); ok && a.Key == "plan" {
				h.onPlan(p)
			}
			return true
		})
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *planLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &planLog{next: h.next.WithAttrs(as), onPlan: h.onPlan}
}

func (h *planLog) WithGroup(name string) slog.Handler {
	return &planLog{next: h.next.WithGroup(name), onPlan: h.onPlan}
}
