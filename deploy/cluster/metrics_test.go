package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/internal/telemetry/telemetrytest"
)

// scrape reads one /metrics: the families, and every sample's value keyed
// by its line up to the value.
func scrape(ctx context.Context, addr string) (map[string]telemetrytest.Family, map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	vals := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndex(line, " ")
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			vals[line[:i]] = v
		}
	}
	return telemetrytest.ParseText(string(b)), vals, nil
}

// documentedMetrics reads the metric names of docs/metrics.md's tables.
func documentedMetrics(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(conflistPath(t)), "..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "| `allot_") {
			out = append(out, strings.Trim(strings.TrimSpace(strings.Split(line, "|")[1]), "`"))
		}
	}
	return out
}

var callSample = regexp.MustCompile(`^allot_broker_ec2_calls_total\{action="([^"]+)"`)

// sumBy adds the samples of one family by the label the pattern captures.
func sumBy(vals map[string]float64, re *regexp.Regexp) map[string]int64 {
	out := map[string]int64{}
	for k, v := range vals {
		if m := re.FindStringSubmatch(k); m != nil {
			out[m[1]] += int64(v)
		}
	}
	return out
}

func sumOf(vals map[string]float64, prefix string) float64 {
	s := 0.0
	for k, v := range vals {
		if strings.HasPrefix(k, prefix) {
			s += v
		}
	}
	return s
}

// TestMetricsDuringBurst scrapes the broker and every agent, as Prometheus
// would, while a burst of pods needs new ENIs and after it: every metric
// docs/metrics.md lists is exported by one of them, and the figures are
// the cluster's — the EC2 calls the broker counts are the calls awssim
// received, action by action; the pods the agents and the broker count
// are the pods created; the node limits are the instance type's.
func TestMetricsDuringBurst(t *testing.T) {
	c := startCluster(t, testConfig(t, 2))
	const perNode = 20 // more than the primary ENI holds: each node needs a new ENI
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	done := make(chan []AddResult, 1)
	go func() {
		res, _ := c.AddPods(ctx, perNode, 8, "met")
		done <- res
	}()
	// During the burst: the broker answers the scrape while it works.
	var during map[string]telemetrytest.Family
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		if during, _, err = scrape(ctx, c.Broker.Metrics); err != nil {
			t.Fatalf("scrape the broker during the burst: %v", err)
		}
		if _, ok := during["allot_broker_ec2_calls_total"]; ok || time.Now().After(deadline) {
			break
		}
	}
	if _, ok := during["allot_broker_leader"]; !ok {
		t.Errorf("broker scrape during the burst lacks allot_broker_leader: %v", during)
	}
	podsOf(t, <-done)

	var bFams map[string]telemetrytest.Family
	var bVals map[string]float64
	eventually(t, 30*time.Second, "broker's EC2 calls equal awssim's, and the pods are counted", func() error {
		before, err := c.Counters(ctx)
		if err != nil {
			return err
		}
		if bFams, bVals, err = scrape(ctx, c.Broker.Metrics); err != nil {
			return err
		}
		after, err := c.Counters(ctx)
		if err != nil {
			return err
		}
		ours := sumBy(bVals, callSample)
		for action, a := range after {
			if a.Calls != before[action].Calls {
				return fmt.Errorf("awssim counters moved during the scrape")
			}
			if ours[action] != a.Calls {
				return fmt.Errorf("%s: broker counted %d calls, awssim %d", action, ours[action], a.Calls)
			}
		}
		assigned := 0.0
		for k, v := range bVals {
			if strings.HasPrefix(k, "allot_broker_subnet_addresses{") && strings.Contains(k, `kind="assigned"`) {
				assigned += v
			}
		}
		if assigned != 2*perNode {
			return fmt.Errorf("broker counts %v addresses assigned to pods, want %d", assigned, 2*perNode)
		}
		return nil
	})
	if bVals["allot_broker_leader"] != 1 {
		t.Errorf("allot_broker_leader = %v, want 1", bVals["allot_broker_leader"])
	}

	secondaries := 0.0 // ENIs the broker created, as the agents hold them
	all := map[string]bool{}
	for n := range bFams {
		all[n] = true
	}
	for _, node := range c.Nodes {
		fams, vals, err := scrape(ctx, node.Agent.Metrics)
		if err != nil {
			t.Fatalf("scrape %s: %v", node.Name, err)
		}
		for n := range fams {
			all[n] = true
		}
		if vals["allot_agent_pool_enis"] < 2 {
			t.Errorf("%s holds %v ENIs after %d pods, want a new one at least", node.Name, vals["allot_agent_pool_enis"], perNode)
		}
		secondaries += vals["allot_agent_pool_enis"] - 1
		// The ADDs' addresses were written to the checkpoint, no write
		// failed, and a write to a local file takes under a second.
		writes := vals[`allot_agent_checkpoint_write_seconds_count{result="ok"}`]
		if writes < 1 || vals[`allot_agent_checkpoint_write_seconds_count{result="error"}`] != 0 {
			t.Errorf("%s: %v checkpoint writes, %v failed", node.Name, writes, vals[`allot_agent_checkpoint_write_seconds_count{result="error"}`])
		}
		if sum := vals[`allot_agent_checkpoint_write_seconds_sum{result="ok"}`]; sum <= 0 || sum/writes > 1 {
			t.Errorf("%s: checkpoint writes took %v s in all over %v writes", node.Name, sum, writes)
		}
		if w, d := vals[`allot_agent_add_address_wait_seconds_sum{result="ok"}`], vals[`allot_agent_cni_duration_seconds_sum{verb="add"}`]; w <= 0 || w > d {
			t.Errorf("%s: ADDs waited %v s in all for their addresses, and took %v s", node.Name, w, d)
		}
		for series, want := range map[string]float64{
			`allot_agent_pool_addresses{state="assigned"}`:           perNode,
			`allot_agent_enis_max`:                                   4,
			`allot_agent_addresses_max`:                              4 * 14,
			`allot_agent_broker_connected`:                           1,
			`allot_agent_cni_requests_total{result="ok",verb="add"}`: perNode,
			// Every ADD got its address, none gave up waiting.
			`allot_agent_add_address_wait_seconds_count{result="ok"}`: perNode,
		} {
			if vals[series] != want {
				t.Errorf("%s: %s = %v, want %v", node.Name, series, vals[series], want)
			}
		}
	}
	// An ENI the broker attached joins an agent's pool once IMDS shows it,
	// a moment later.
	created := sumOf(bVals, `allot_broker_tasks_total{kind="create-attach",result="done"}`)
	eventually(t, 15*time.Second, "the agents hold every ENI the broker created", func() error {
		if secondaries == created {
			return nil
		}
		secondaries = 0
		for _, node := range c.Nodes {
			_, vals, err := scrape(ctx, node.Agent.Metrics)
			if err != nil {
				return err
			}
			secondaries += vals["allot_agent_pool_enis"] - 1
		}
		if secondaries != created {
			return fmt.Errorf("the broker counts %v ENIs created and attached; the agents hold %v", created, secondaries)
		}
		return nil
	})
	counters, err := c.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	throttled := int64(0)
	for _, a := range counters {
		throttled += a.Throttled
	}
	for _, name := range documentedMetrics(t) {
		if name == "allot_broker_ec2_throttled_total" && throttled == 0 {
			continue // a counter with no event has no series; EC2 throttled nothing
		}
		if !all[name] {
			t.Errorf("documented metric %s is exported by neither the broker nor an agent", name)
		}
	}
}
