package metrics_test

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/metrics"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/internal/telemetry"
)

type lead struct{ on atomic.Bool }

func (l *lead) IsLeader() bool { return l.on.Load() }

// scrape returns the value of every sample, keyed by its line up to the
// value ("name{labels}").
func scrape(t *testing.T, m *telemetry.Metrics) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := map[string]float64{}
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndex(line, " ")
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func want(t *testing.T, got map[string]float64, series string, v float64) {
	t.Helper()
	if g, ok := got[series]; !ok || g != v {
		t.Errorf("%s = %v (present %v), want %v", series, g, ok, v)
	}
}

// TestClusterGauges reads a real etcd through the store, on the leader
// only, and times the etcd requests that took.
func TestClusterGauges(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, err := telemetry.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	meter := m.Meter(metrics.MeterName)
	dial, err := metrics.EtcdDialOptions(meter)
	if err != nil {
		t.Fatal(err)
	}
	srv := etcdembedtest.StartServer(t)
	cli, err := srv.Client(dial...)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	st, err := store.Open(cli, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutSubnet(ctx, store.Subnet{ID: "subnet-a", CIDR: "10.0.0.0/24", AvailabilityZone: "us-east-1a", Usable: 251}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"i-1", "i-2"} {
		if _, err := st.PutNode(ctx, store.Node{InstanceID: id, InstanceType: "c5.xlarge", SubnetID: "subnet-a",
			AvailabilityZone: "us-east-1a", MaxENIs: 4, IPv4PerENI: 15}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.KeepAlive(ctx, "i-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := st.PutDemand(ctx, store.Demand{InstanceID: "i-1", Pending: 3, WarmShortfall: 14}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutNodeStatus(ctx, store.NodeStatus{InstanceID: "i-2", Reason: store.UnmetBudget, Message: "x"}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	if _, err := st.BeginIntent(ctx, store.Intent{Kind: store.IntentCreate, InstanceID: "i-1", SubnetID: "subnet-a", Reserved: 15}); err != nil {
		t.Fatal(err)
	}
	lim := ratelimit.New(ratelimit.Config{})
	for range 3 {
		if err := lim.Wait(ctx, ratelimit.CreateNetworkInterface); err != nil {
			t.Fatal(err)
		}
	}
	l := &lead{}
	if err := metrics.Register(meter, metrics.Sources{Limiter: lim, Leader: l, State: st,
		Now: func() time.Time { return created.Add(90 * time.Second) }}); err != nil {
		t.Fatal(err)
	}

	got := scrape(t, m)
	want(t, got, "allot_broker_leader", 0)
	if _, ok := got[`allot_broker_intents_open{kind="create"}`]; ok {
		t.Error("a standby reports the cluster's gauges")
	}
	want(t, got, `allot_broker_ratelimit_taken_total{bucket="CreateNetworkInterface"}`, 3)

	l.on.Store(true)
	got = scrape(t, m)
	want(t, got, "allot_broker_leader", 1)
	want(t, got, `allot_broker_subnet_addresses{az="us-east-1a",kind="usable",subnet="subnet-a"}`, 251)
	want(t, got, `allot_broker_subnet_addresses{az="us-east-1a",kind="reserved",subnet="subnet-a"}`, 15)
	want(t, got, `allot_broker_az_addresses{az="us-east-1a",kind="reserved"}`, 15)
	want(t, got, `allot_broker_intents_open{kind="create"}`, 1)
	want(t, got, `allot_broker_intents_open{kind="attach"}`, 0)
	if age := got[`allot_broker_intents_oldest_age_seconds{kind="create"}`]; age < 89 || age > 91 {
		t.Errorf("oldest create intent is %vs old, want 90", age)
	}
	want(t, got, "allot_broker_demand_pods_waiting", 3)
	want(t, got, "allot_broker_demand_warm_shortfall", 14)
	want(t, got, `allot_broker_nodes{alive="true",status="ok"}`, 1)
	want(t, got, `allot_broker_nodes{alive="false",status="budget_exhausted"}`, 1)
	if got[`allot_broker_subnet_headroom_pods{az="us-east-1a",subnet="subnet-a"}`] <= 0 {
		t.Error("a subnet with 236 addresses available fits no pod")
	}
	if got[`allot_broker_etcd_duration_seconds_count{code="OK",method="KV/Txn"}`] < 1 {
		t.Errorf("etcd transactions were not timed: %v", keysWith(got, "etcd"))
	}
	want(t, got, "allot_broker_state_read_errors_total", 0)
}

func keysWith(m map[string]float64, sub string) []string {
	var out []string
	for k := range m {
		if strings.Contains(k, sub) {
			out = append(out, k)
		}
	}
	return out
}
