// Package metrics registers the broker's instruments that read state other
// packages keep — the rate limiter's buckets, the lead — and times every
// etcd request. The EC2 client counts its own calls (ec2client.Config.Meter).
// All of them are documented in docs/metrics.md.
package metrics

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/allotnet/allot/broker/ratelimit"
)

// MeterName is the broker's instrumentation scope.
const MeterName = "github.com/allotnet/allot/broker"

// Limiter is what the bucket gauges read (ratelimit.Limiter).
type Limiter interface {
	Stats() map[ratelimit.Class]ratelimit.Stats
	Tokens(c ratelimit.Class) float64
	Bucket(c ratelimit.Class) ratelimit.Bucket
}

// Leader tells whether this replica leads (leader.Elector).
type Leader interface {
	IsLeader() bool
}

var (
	_ Limiter = (*ratelimit.Limiter)(nil)
)

// Sources are what the gauges read at each scrape; a nil one is skipped.
type Sources struct {
	Limiter Limiter
	Leader  Leader
	// State is etcd, read while Leader leads.
	State State
	// Engine returns the leader's engine of the current term (nil when
	// none); nil Engine skips the planning counters.
	Engine func() Engine
	// Drift returns the leader's reconciler of the current term (nil when
	// none); nil Drift skips the drift gauge.
	Drift func() Drift
	// Now is the clock intent ages are measured with; nil is time.Now.
	Now func() time.Time
}

// Register creates the instruments on m.
func Register(m metric.Meter, s Sources) error {
	tokens, err := m.Float64ObservableGauge("allot.broker.ratelimit.tokens",
		metric.WithDescription("Tokens in the broker's copy of each EC2 bucket; negative while calls wait on credit"))
	if err != nil {
		return fmt.Errorf("tokens gauge: %w", err)
	}
	size, err := m.Int64ObservableGauge("allot.broker.ratelimit.size",
		metric.WithDescription("Size of each EC2 bucket the broker may use (its share, less one token of slack)"))
	if err != nil {
		return fmt.Errorf("bucket size gauge: %w", err)
	}
	taken, err := m.Int64ObservableCounter("allot.broker.ratelimit.taken",
		metric.WithDescription("Tokens handed out, by bucket"))
	if err != nil {
		return fmt.Errorf("taken counter: %w", err)
	}
	waited, err := m.Float64ObservableCounter("allot.broker.ratelimit.wait", metric.WithUnit("s"),
		metric.WithDescription("Time calls were told to wait for a token, summed, by bucket"))
	if err != nil {
		return fmt.Errorf("wait counter: %w", err)
	}
	drained, err := m.Int64ObservableCounter("allot.broker.ratelimit.drained",
		metric.WithDescription("Buckets emptied because EC2 throttled a call (someone else used the tokens)"))
	if err != nil {
		return fmt.Errorf("drained counter: %w", err)
	}
	leading, err := m.Int64ObservableGauge("allot.broker.leader",
		metric.WithDescription("1 while this replica leads (runs the engine and calls EC2), else 0"))
	if err != nil {
		return fmt.Errorf("leader gauge: %w", err)
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if s.Leader != nil {
			v := int64(0)
			if s.Leader.IsLeader() {
				v = 1
			}
			o.ObserveInt64(leading, v)
		}
		if s.Limiter == nil {
			return nil
		}
		for c, st := range s.Limiter.Stats() {
			b := metric.WithAttributes(attribute.String("bucket", string(c)))
			o.ObserveFloat64(tokens, s.Limiter.Tokens(c), b)
			o.ObserveInt64(size, int64(s.Limiter.Bucket(c).Size), b)
			o.ObserveInt64(taken, st.Taken, b)
			o.ObserveFloat64(waited, st.Waited.Seconds(), b)
			o.ObserveInt64(drained, st.Drained, b)
		}
		return nil
	}, tokens, size, taken, waited, drained, leading)
	if err != nil {
		return fmt.Errorf("register bucket callback: %w", err)
	}
	if s.Engine != nil {
		if err := registerEngine(m, s.Engine); err != nil {
			return err
		}
	}
	if s.Drift != nil {
		if err := registerDrift(m, s.Leader, s.Drift); err != nil {
			return err
		}
	}
	if s.State == nil {
		return nil
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	return registerState(m, s.State, s.Leader, s.Now)
}
