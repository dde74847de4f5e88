package ec2client

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/broker/ratelimit"
)

// TestSpansPerRequest: every request EC2 receives is one client span,
// child of the caller's span, named by its action; a refused one carries
// EC2's error code and an error status.
func TestSpansPerRequest(t *testing.T) {
	sim := startSim(t, testScenario())
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	c, err := New(context.Background(), Config{Region: "us-east-1", Endpoint: sim.EC2Endpoint(),
		Limiter: ratelimit.New(ratelimit.Config{TimeScale: 1000}), Tracer: tp})
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := tp.Tracer("test").Start(context.Background(), "plan round")
	e, err := c.CreateENI(ctx, CreateENIInput{SubnetID: testSubnet})
	if err != nil {
		t.Fatal(err)
	}
	sim.SetFaults(map[string]awssim.Fault{"DeleteNetworkInterface": {ErrorRate: 1, ErrorCode: CodeInvalidParameterValue}})
	if err := c.DeleteENI(ctx, e.ID); Code(err) != CodeInvalidParameterValue {
		t.Fatalf("delete with a fault: %v", err)
	}
	parent.End()

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
	}
	create, del := byName["EC2 CreateNetworkInterface"], byName["EC2 DeleteNetworkInterface"]
	if create == nil || del == nil {
		t.Fatalf("spans: %v", byName)
	}
	for _, s := range []sdktrace.ReadOnlySpan{create, del} {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("%s is not a child of the caller's span", s.Name())
		}
	}
	if create.Status().Code == codes.Error {
		t.Errorf("successful create has status %v", create.Status())
	}
	if del.Status().Code != codes.Error || !hasAttr(del.Attributes(), "aws.error.code", CodeInvalidParameterValue) {
		t.Errorf("refused delete: status %v, attributes %v", del.Status(), del.Attributes())
	}
	if n := sim.Counters()["CreateNetworkInterface"].Calls; n != 1 {
		t.Errorf("awssim saw %d creates, one span", n)
	}
}

func hasAttr(kvs []attribute.KeyValue, k, v string) bool {
	for _, kv := range kvs {
		if string(kv.Key) == k && kv.Value.AsString() == v {
			return true
		}
	}
	return false
}
