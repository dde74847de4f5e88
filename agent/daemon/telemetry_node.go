package daemon

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"

	"github.com/allotnet/allot/cni/delqueue"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// registerNodeGauges reports what bounds the node's pool (aws-vpc-cni's
// awscni_eni_max and awscni_ip_max) and the DELs the plugin queued while
// the agent could not take them.
func registerNodeGauges(m metric.Meter, a *Agent) error {
	maxENIs, err := m.Int64ObservableGauge("allot.agent.enis.max",
		metric.WithDescription("Most ENIs the node may hold: the instance type's limit, or --max-enis if lower"))
	if err != nil {
		return fmt.Errorf("ENI maximum gauge: %w", err)
	}
	maxAddrs, err := m.Int64ObservableGauge("allot.agent.addresses.max",
		metric.WithDescription("Most pod addresses the node may hold: every slot of every ENI but each ENI's own address "+
			"(16 per slot in prefix mode)"))
	if err != nil {
		return fmt.Errorf("address maximum gauge: %w", err)
	}
	queued, err := m.Int64ObservableGauge("allot.agent.delqueue.depth",
		metric.WithDescription("DELs the plugin queued on disk while the agent was unreachable, not yet replayed"))
	if err != nil {
		return fmt.Errorf("DEL queue gauge: %w", err)
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if !a.ready.Load() {
			return nil
		}
		l := a.link.Limits()
		enis := l.MaxENIs
		if w := a.cfg.Warm.MaxENIs; w > 0 && w < enis {
			enis = w
		}
		per := max(l.IPv4PerENI-1, 0)
		if a.cfg.Warm.PrefixMode {
			per *= allotv1.PrefixSize
		}
		o.ObserveInt64(maxENIs, int64(enis))
		o.ObserveInt64(maxAddrs, int64(enis*per))
		if a.cfg.DelQueueDir != "" {
			if names, err := delqueue.List(a.cfg.DelQueueDir); err == nil {
				o.ObserveInt64(queued, int64(len(names)))
			}
		}
		return nil
	}, maxENIs, maxAddrs, queued)
	if err != nil {
		return fmt.Errorf("register node gauges: %w", err)
	}
	return nil
}
