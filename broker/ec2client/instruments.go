package ec2client

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// instruments count and time every request sent to EC2, throttled retries
// included, so the counts match EC2's (and awssim's) own.
type instruments struct {
	calls     metric.Int64Counter
	throttled metric.Int64Counter
	duration  metric.Float64Histogram
}

func newInstruments(m metric.Meter) (instruments, error) {
	if m == nil {
		m = noop.NewMeterProvider().Meter("ec2client")
	}
	var ins instruments
	var err error
	if ins.calls, err = m.Int64Counter("allot.broker.ec2.calls",
		metric.WithDescription("EC2 requests sent, by action and outcome (ok, throttled, error, unanswered) "+
			"and EC2's error code")); err != nil {
		return ins, fmt.Errorf("ec2 call counter: %w", err)
	}
	if ins.throttled, err = m.Int64Counter("allot.broker.ec2.throttled",
		metric.WithDescription("EC2 requests answered RequestLimitExceeded, by action")); err != nil {
		return ins, fmt.Errorf("ec2 throttle counter: %w", err)
	}
	if ins.duration, err = m.Float64Histogram("allot.broker.ec2.duration", metric.WithUnit("s"),
		metric.WithDescription("Time EC2 took to answer one request (the rate-limit wait not included), by action"),
		metric.WithExplicitBucketBoundaries(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)); err != nil {
		return ins, fmt.Errorf("ec2 latency histogram: %w", err)
	}
	return ins, nil
}

// call records one request's answer.
func (ins instruments) call(ctx context.Context, action string, took time.Duration, err error) {
	outcome, code := "ok", ""
	if err != nil {
		e := wrap(action, err)
		code = e.Code
		switch {
		case IsThrottle(e):
			outcome = "throttled"
		case code == "":
			outcome = "unanswered"
		default:
			outcome = "error"
		}
	}
	act := attribute.String("action", action)
	// The context of a call that gave up is done; the count must still land.
	ctx = context.WithoutCancel(ctx)
	ins.calls.Add(ctx, 1, metric.WithAttributes(act, attribute.String("outcome", outcome), attribute.String("code", code)))
	ins.duration.Record(ctx, took.Seconds(), metric.WithAttributes(act))
	if outcome == "throttled" {
		ins.throttled.Add(ctx, 1, metric.WithAttributes(act))
	}
}
