package metrics

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/allotnet/allot/broker/executor"
)

// Engine reports the leader's engine counters (executor.Engine). The
// counters start again at every term, which Prometheus reads as a reset.
type Engine interface {
	Stats() executor.Stats
}

var _ Engine = (*executor.Engine)(nil)

// registerEngine creates the planning counters; engine returns the engine
// of the current term, or nil when this replica has not led.
func registerEngine(m metric.Meter, engine func() Engine) error {
	var errs []error
	counter := func(name, unit, desc string) metric.Float64ObservableCounter {
		c, err := m.Float64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	rounds := counter("allot.broker.plan.rounds", "", "Planning rounds of the leader's engine (this term)")
	plans := counter("allot.broker.plan.plans", "", "Rounds that planned at least one EC2 action")
	took := counter("allot.broker.plan.duration", "s", "Wall time the planning rounds took, summed; "+
		"divided by the rounds, the average round")
	tasks := counter("allot.broker.tasks", "", "EC2 actions by kind (create-attach, assign, unassign, detach, delete, "+
		"resolve…) and result (started, done, failed)")
	delivered := counter("allot.broker.addresses.delivered", "", "Addresses added to nodes (16 per prefix)")
	released := counter("allot.broker.addresses.released", "", "Addresses given back to EC2 after a node acknowledged them free")
	refused := counter("allot.broker.budget.refused", "", "Intents the store refused for lack of subnet budget")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("engine counters: %w", err)
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		e := engine()
		if e == nil {
			return nil
		}
		s := e.Stats()
		o.ObserveFloat64(rounds, float64(s.Rounds))
		o.ObserveFloat64(plans, float64(s.Plans))
		o.ObserveFloat64(took, s.RoundTime.Seconds())
		o.ObserveFloat64(delivered, float64(s.Delivered))
		o.ObserveFloat64(released, float64(s.Released))
		o.ObserveFloat64(refused, float64(s.BudgetRefused))
		for result, byKind := range map[string]map[string]int64{"started": s.Started, "done": s.Done, "failed": s.Failed} {
			for kind, n := range byKind {
				o.ObserveFloat64(tasks, float64(n), metric.WithAttributes(
					attribute.String("kind", kind), attribute.String("result", result)))
			}
		}
		return nil
	}, rounds, plans, took, tasks, delivered, released, refused)
	if err != nil {
		return fmt.Errorf("register engine counters: %w", err)
	}
	return nil
}
