package executor

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/ratelimit/ratelimittest"
)

// admitted collects the actions of every plan the engine carries out (it
// logs each, with the actions the buckets admitted, before queueing them).
type admitted struct{ actions *[]planner.Action }

func (h admitted) Enabled(context.Context, slog.Level) bool { return true }
func (h admitted) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if p, ok := a.Value.Any().(planner.Plan); ok {
			*h.actions = append(*h.actions, p.Actions...)
		}
		return true
	})
	return nil
}
func (h admitted) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h admitted) WithGroup(string) slog.Handler      { return h }

func sortedActions(as []planner.Action) []planner.Action {
	out := slices.Clone(as)
	slices.SortFunc(out, func(a, b planner.Action) int {
		return cmp.Or(strings.Compare(a.InstanceID, b.InstanceID), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.DeviceIndex, b.DeviceIndex))
	})
	return out
}

// TestPartsAdmitAsAWholePlan: in a burst of 400 nodes alike, with the
// buckets empty, refilled a little, refilled a lot and full, a round that
// plans its nodes a part at a time queues the very actions a plan of every
// node at once would have had admitted.
func TestPartsAdmitAsAWholePlan(t *testing.T) {
	for _, refill := range []time.Duration{0, 300 * time.Millisecond, 2 * time.Second, time.Minute} {
		t.Run(fmt.Sprint(refill), func(t *testing.T) {
			clk := ratelimittest.NewManualClock(time.Now())
			e, snap := burstStateAt(400, clk)
			clk.Advance(refill)
			free := func(string) bool { return true }
			now := e.cfg.Clock.Now()

			// A plan of every node at once, as rounds made before parts.
			rs := newRunState(func(error) {})
			w, held, _ := e.plannable(rs, snap, free, now, true)
			nodes := w.all()
			budgets := planner.Budgets{}
			for id, sn := range snap.subnets {
				budgets[id] = sn.Available()
			}
			opt := planner.Options{Policy: e.cfg.PlanPolicy, Buckets: e.buckets(rs)}
			if anyChoice(nodes, nil) {
				opt.Expected = heldNodes(held.views())
			}
			whole, _ := e.carryOut(rs, snap, planner.MakeWith(nodes, budgets, opt), budgets)

			var got []planner.Action
			e.log = slog.New(admitted{&got})
			e.plan(newRunState(func(error) {}), snap, nil, free, now)
			if len(whole) == 0 {
				t.Fatal("the whole plan had nothing admitted: the test shows nothing")
			}
			if !reflect.DeepEqual(sortedActions(got), sortedActions(whole)) {
				t.Errorf("in parts %d actions:\n%v\nat once %d:\n%v", len(got), sortedActions(got), len(whole), sortedActions(whole))
			}
			t.Logf("%d actions admitted of %d nodes' plans", len(whole), len(nodes))
		})
	}
}
