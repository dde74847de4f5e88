package ec2client

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/allotnet/allot/broker/ratelimit"
)

// instruments count and time every request sent to EC2, throttled retries
// included, so the counts match EC2's (and awssim's) own.
type instruments struct {
	calls     metric.Int64Counter
	throttled metric.Int64Counter
	duration  metric.Float64Histogram
	tracer    trace.Tracer
}

func newInstruments(m metric.Meter, tp trace.TracerProvider) (instruments, error) {
	if m == nil {
		m = noop.NewMeterProvider().Meter("ec2client")
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	ins := instruments{tracer: tp.Tracer("github.com/allotnet/allot/broker/ec2client")}
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

// start opens the client span of one request.
func (ins instruments) start(ctx context.Context, action string, class ratelimit.Class, attempt int) (context.Context, trace.Span) {
	return ins.tracer.Start(ctx, "EC2 "+action, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("rpc.system", "aws-api"), attribute.String("rpc.service", "EC2"),
		attribute.String("rpc.method", action), attribute.String("allot.ec2.bucket", string(class)),
		attribute.Int("allot.ec2.attempt", attempt)))
}

// endSpan records the answer on the span and ends it.
func endSpan(span trace.Span, action string, err error) {
	if err != nil {
		e := wrap(action, err)
		span.SetAttributes(attribute.String("aws.error.code", e.Code))
		span.RecordError(err)
		span.SetStatus(codes.Error, e.Error())
	}
	span.End()
}
