// Package monitoring_test checks the Grafana dashboard and the Prometheus
// alert rules in this directory, and docs/metrics.md, against the metrics
// the broker and the agent register: every series they name must be one
// the code exports, and every exported metric must be documented.
package monitoring_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/metrics"
	"github.com/allotnet/allot/internal/telemetry/telemetrytest"
)

// noState stands in for etcd: the recorder never runs callbacks.
type noState struct{ metrics.State }

// exported returns every metric family the broker and the agent register,
// by its Prometheus name, as the exporter they use names it.
func exported(t *testing.T) map[string]telemetrytest.Family {
	t.Helper()
	rec := telemetrytest.NewRecorder()
	if _, err := ec2client.New(context.Background(), ec2client.Config{Region: "us-east-1", Meter: rec}); err != nil {
		t.Fatal(err)
	}
	if err := metrics.Register(rec, metrics.Sources{State: noState{}, Engine: func() metrics.Engine { return nil },
		Drift: func() metrics.Drift { return nil }}); err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.EtcdDialOptions(rec); err != nil {
		t.Fatal(err)
	}
	if err := daemon.Instruments(rec); err != nil {
		t.Fatal(err)
	}
	fams, err := telemetrytest.Exported(rec.Instruments())
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) < 20 {
		t.Fatalf("only %d families registered: %v", len(fams), names(fams))
	}
	return fams
}

func names(fams map[string]telemetrytest.Family) []string {
	var out []string
	for n := range fams {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// series is every name a query may use: families and their samples.
func series(fams map[string]telemetrytest.Family) map[string]bool {
	out := map[string]bool{}
	for n, f := range fams {
		out[n] = true
		for _, s := range f.Series {
			out[s] = true
		}
	}
	return out
}

var metricName = regexp.MustCompile(`\ballot_[a-z0-9_]+\b`)

// documented reads the metric names of docs/metrics.md's tables: the
// first column, in backquotes.
func documented(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `allot_") {
			continue
		}
		cell := strings.Trim(strings.TrimSpace(strings.Split(line, "|")[1]), "`")
		out[cell] = true
	}
	return out
}

func TestDocsListEveryMetric(t *testing.T) {
	fams := exported(t)
	docs := documented(t)
	for n := range fams {
		if !strings.HasPrefix(n, "allot_") {
			continue // the exporter's own (target_info)
		}
		if !docs[n] {
			t.Errorf("docs/metrics.md does not list %s (%s)", n, fams[n].Help)
		}
	}
	for n := range docs {
		if _, ok := fams[n]; !ok {
			t.Errorf("docs/metrics.md lists %s, which nothing exports", n)
		}
	}
}

// exprs collects every "expr" string in a JSON or YAML document.
func exprs(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "expr" {
				*out = append(*out, s)
				continue
			}
			exprs(e, out)
		}
	case []any:
		for _, e := range x {
			exprs(e, out)
		}
	}
}

func checkNames(t *testing.T, file string, queries []string, known map[string]bool) {
	t.Helper()
	if len(queries) == 0 {
		t.Fatalf("%s: no queries found", file)
	}
	for _, q := range queries {
		if strings.Count(q, "(") != strings.Count(q, ")") || strings.Count(q, "{") != strings.Count(q, "}") {
			t.Errorf("%s: unbalanced query %q", file, q)
		}
		for _, n := range metricName.FindAllString(q, -1) {
			if !known[n] {
				t.Errorf("%s: %q names %s, which nothing exports", file, q, n)
			}
		}
	}
}

func TestDashboardNamesExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	if d["title"] == nil || d["uid"] == nil {
		t.Fatal("dashboard has no title or uid")
	}
	var qs []string
	exprs(d, &qs)
	checkNames(t, "grafana-dashboard.json", qs, series(exported(t)))
}

// rules is the part of a PrometheusRule the test reads.
type rules struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// wantAlerts are the conditions operators asked to be paged about.
var wantAlerts = []string{
	"AllotEC2Throttled", "AllotPodsWaitingForAddresses", "AllotSubnetNearlyFull", "AllotBrokerLeaderMissing",
	"AllotIntentStuck", "AllotAgentBrokerDisconnected", "AllotDriftFound",
}

func TestAlertRulesNameExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var r rules
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	if r.APIVersion != "monitoring.coreos.com/v1" || r.Kind != "PrometheusRule" {
		t.Fatalf("alerts.yaml is %s %s, want a monitoring.coreos.com/v1 PrometheusRule", r.APIVersion, r.Kind)
	}
	known := series(exported(t))
	anchors := sections(t)
	seen := map[string]bool{}
	var qs []string
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			seen[rule.Alert] = true
			qs = append(qs, rule.Expr)
			if rule.Alert == "" || rule.Expr == "" || rule.Labels["severity"] == "" ||
				rule.Annotations["summary"] == "" || rule.Annotations["description"] == "" {
				t.Errorf("rule %q lacks a name, expr, severity, summary or description", rule.Alert)
			}
			_, anchor, ok := strings.Cut(rule.Annotations["runbook_url"], "docs/troubleshooting.md#")
			if !ok || !anchors[anchor] {
				t.Errorf("rule %s: runbook_url %q is no section of docs/troubleshooting.md", rule.Alert, rule.Annotations["runbook_url"])
			}
		}
	}
	for _, a := range wantAlerts {
		if !seen[a] {
			t.Errorf("alerts.yaml has no %s rule", a)
		}
	}
	checkNames(t, "alerts.yaml", qs, known)
}

// sections returns the anchors of docs/troubleshooting.md's headings, as
// GitHub makes them.
func sections(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var a strings.Builder
		for _, r := range h {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				a.WriteRune(r)
			case r == ' ':
				a.WriteRune('-')
			}
		}
		out[a.String()] = true
	}
	return out
}
