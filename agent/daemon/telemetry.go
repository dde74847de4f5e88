package daemon

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/pool"
)

// instruments holds the agent's OpenTelemetry instruments. Without an
// introspection or metrics address they are no-ops.
type instruments struct {
	requests   metric.Int64Counter
	duration   metric.Float64Histogram
	addrWait   metric.Float64Histogram
	checkpoint metric.Float64Histogram
}

const meterName = "github.com/allotnet/allot/agent"

// Instruments registers the agent's instruments on m with no agent behind
// them (their callbacks must not run). The metric documentation, the
// dashboards and the alert rules are checked against what it registers.
func Instruments(m metric.Meter) error {
	_, err := newTelemetry(m, &Agent{})
	return err
}

func newTelemetry(m metric.Meter, a *Agent) (*instruments, error) {
	t := &instruments{}
	var err error
	if t.requests, err = m.Int64Counter("allot.agent.cni.requests",
		metric.WithDescription("CNI requests served, by verb and result (ok or the error's gRPC code)")); err != nil {
		return nil, err
	}
	if t.duration, err = m.Float64Histogram("allot.agent.cni.duration", metric.WithUnit("s"),
		metric.WithDescription("Time to serve a CNI request, waiting for an address included"),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30)); err != nil {
		return nil, err
	}
	if t.addrWait, err = m.Float64Histogram("allot.agent.add.address_wait", metric.WithUnit("s"),
		metric.WithDescription("Time an ADD took to get its address from the pool, recorded durably: "+
			"a checkpoint write when the pool has one, the wait for the broker's delivery when it has none"),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60)); err != nil {
		return nil, err
	}
	if t.checkpoint, err = m.Float64Histogram("allot.agent.checkpoint.write", metric.WithUnit("s"),
		metric.WithDescription("Time one checkpoint write took (an append and its fsync, or a compacting rewrite), by result"),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)); err != nil {
		return nil, err
	}
	if err := registerPoolGauges(m, a); err != nil {
		return nil, err
	}
	if err := registerNodeGauges(m, a); err != nil {
		return nil, err
	}
	return t, nil
}

// registerPoolGauges registers the pool's and the broker link's gauges,
// read from the agent at each collection once it is ready.
func registerPoolGauges(m metric.Meter, a *Agent) error {
	addrs, err := m.Int64ObservableGauge("allot.agent.pool.addresses",
		metric.WithDescription("Pool addresses by state (free, cooling, assigned, releasing)"))
	if err != nil {
		return err
	}
	enis, err := m.Int64ObservableGauge("allot.agent.pool.enis", metric.WithDescription("ENIs in the pool"))
	if err != nil {
		return err
	}
	pending, err := m.Int64ObservableGauge("allot.agent.adds.waiting",
		metric.WithDescription("ADDs waiting for an address right now"))
	if err != nil {
		return err
	}
	unconfirmed, err := m.Int64ObservableGauge("allot.agent.addresses.unconfirmed",
		metric.WithDescription("Addresses the broker delivered that are not in the pool yet (their ENI not set up yet)"))
	if err != nil {
		return err
	}
	disagreed, err := m.Int64ObservableCounter("allot.agent.imds.disagreements",
		metric.WithDescription("Delivered addresses IMDS still didn't show well after they joined the pool"))
	if err != nil {
		return err
	}
	connected, err := m.Int64ObservableGauge("allot.agent.broker.connected",
		metric.WithDescription("1 while the broker answers, else 0"))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if !a.ready.Load() {
			return nil
		}
		s := a.pool.Stats()
		free := s.Total - s.Assigned - s.Cooling
		for state, n := range map[string]int{"free": free, "cooling": s.Cooling, "assigned": s.Assigned, "releasing": s.Releasing} {
			o.ObserveInt64(addrs, int64(n), metric.WithAttributes(attribute.String("state", state)))
		}
		o.ObserveInt64(enis, int64(s.ENIs))
		o.ObserveInt64(pending, int64(a.pool.Pending()))
		bs := a.link.Status()
		o.ObserveInt64(unconfirmed, int64(bs.Unconfirmed))
		o.ObserveInt64(disagreed, a.IMDSDisagreements())
		c := int64(0)
		if bs.Connected {
			c = 1
		}
		o.ObserveInt64(connected, c)
		return nil
	}, addrs, enis, pending, unconfirmed, disagreed, connected)
	return err
}

// request records one CNI request.
func (t *instruments) request(ctx context.Context, verb string, start time.Time, err error) {
	result := "ok"
	if err != nil {
		result = cniserver.Code(err).String()
	}
	t.requests.Add(ctx, 1, metric.WithAttributes(attribute.String("verb", verb), attribute.String("result", result)))
	t.duration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attribute.String("verb", verb)))
}

// addressWait records how long an ADD took to get its address, and whether
// it got one (result ok) or gave up waiting (no_address) or failed (error).
func (t *instruments) addressWait(ctx context.Context, d time.Duration, err error) {
	result := "ok"
	switch {
	case errors.Is(err, pool.ErrNoAddress):
		result = "no_address"
	case err != nil:
		result = "error"
	}
	t.addrWait.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String("result", result)))
}

// timedStore is the pool's checkpoint with each write timed.
type timedStore struct {
	f   *checkpoint.File
	tel *instruments
}

var _ pool.Persister = timedStore{}

func (s timedStore) Save(st checkpoint.State) error {
	start := time.Now()
	err := s.f.Save(st)
	result := "ok"
	if err != nil {
		result = "error"
	}
	s.tel.checkpoint.Record(context.Background(), time.Since(start).Seconds(),
		metric.WithAttributes(attribute.String("result", result)))
	return err
}
