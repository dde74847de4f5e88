package metrics

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/allotnet/allot/broker/reconciler"
)

// Drift is the leader's reconciler: its latest comparison of etcd with EC2.
type Drift interface {
	Last() reconciler.Report
}

var _ Drift = (*reconciler.Reconciler)(nil)

// driftKinds are reported even at zero, so an alert on them has a series.
var driftKinds = []string{reconciler.KindLeakedENI, reconciler.KindMissingENI, reconciler.KindUntaggedENI,
	reconciler.KindAddressDrift, reconciler.KindAttachmentDrift, reconciler.KindSubnetUse, reconciler.KindSubnetRecord,
	reconciler.KindInstanceGone}

// registerDrift creates the gauge of what the leader's last reconcile pass
// found: the findings `allotctl check` would list on the EC2 side.
func registerDrift(m metric.Meter, lead Leader, drift func() Drift) error {
	g, err := m.Int64ObservableGauge("allot.broker.drift.findings",
		metric.WithDescription("Disagreements between etcd and EC2 the leader's last reconcile pass found, by kind "+
			"(leaked-eni, missing-eni, address-drift…); the reconciler repairs the safe ones on later passes"))
	if err != nil {
		return fmt.Errorf("drift gauge: %w", err)
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if lead != nil && !lead.IsLeader() {
			return nil
		}
		d := drift()
		if d == nil {
			return nil
		}
		rep := d.Last()
		if rep.At.IsZero() {
			return nil // no pass yet this term
		}
		count := map[string]int64{}
		for _, f := range rep.Findings {
			count[f.Kind]++
		}
		for _, k := range driftKinds {
			o.ObserveInt64(g, count[k], metric.WithAttributes(attribute.String("kind", k)))
		}
		return nil
	}, g)
	if err != nil {
		return fmt.Errorf("register drift gauge: %w", err)
	}
	return nil
}
