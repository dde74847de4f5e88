package ec2client

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/throttle"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/internal/telemetry"
)

// TestMetricsMatchEC2: the exported call counters agree with what awssim
// received, outcome by outcome — successes, throttles and errors — and
// every request was timed.
func TestMetricsMatchEC2(t *testing.T) {
	sc := testScenario()
	sc.Throttle.Buckets = map[string]throttle.Spec{"AssignPrivateIpAddresses": {Capacity: 1, Refill: 5}}
	sim := startSim(t, sc)
	m, err := telemetry.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(context.Background(), Config{Region: "us-east-1", Endpoint: sim.EC2Endpoint(),
		Limiter: ratelimit.New(ratelimit.Config{TimeScale: 100}), Meter: m.Meter("test")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e, err := c.CreateENI(ctx, CreateENIInput{SubnetID: testSubnet})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := c.AssignAddresses(ctx, e.ID, 1, false); err != nil {
			t.Fatal(err)
		}
	}
	sim.SetFaults(map[string]awssim.Fault{"DeleteNetworkInterface": {ErrorRate: 1, ErrorCode: CodeInvalidParameterValue}})
	if err := c.DeleteENI(ctx, e.ID); Code(err) != CodeInvalidParameterValue {
		t.Fatalf("delete with a fault: %v", err)
	}

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	got := map[string]float64{}
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if i := strings.LastIndex(line, " "); i > 0 && !strings.HasPrefix(line, "#") {
			got[line[:i]], _ = strconv.ParseFloat(line[i+1:], 64)
		}
	}
	counters := sim.Counters()
	assign := counters["AssignPrivateIpAddresses"]
	if assign.Throttled == 0 {
		t.Fatal("awssim never throttled: the test exercised no throttle")
	}
	for series, want := range map[string]int64{
		`allot_broker_ec2_calls_total{action="CreateNetworkInterface",code="",outcome="ok"}`:                              counters["CreateNetworkInterface"].Calls,
		`allot_broker_ec2_calls_total{action="AssignPrivateIpAddresses",code="",outcome="ok"}`:                            assign.Calls - assign.Throttled,
		`allot_broker_ec2_calls_total{action="AssignPrivateIpAddresses",code="RequestLimitExceeded",outcome="throttled"}`: assign.Throttled,
		`allot_broker_ec2_throttled_total{action="AssignPrivateIpAddresses"}`:                                             assign.Throttled,
		`allot_broker_ec2_calls_total{action="DeleteNetworkInterface",code="InvalidParameterValue",outcome="error"}`:      counters["DeleteNetworkInterface"].Calls,
		`allot_broker_ec2_duration_seconds_count{action="AssignPrivateIpAddresses"}`:                                      assign.Calls,
	} {
		if got[series] != float64(want) || want == 0 {
			t.Errorf("%s = %v, awssim says %d", series, got[series], want)
		}
	}
}
