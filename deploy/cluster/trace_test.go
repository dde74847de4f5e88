package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/internal/telemetry/telemetrytest"
)

// TestTracesReachACollector runs the broker, the agents and the CNI plugin
// with the standard OpenTelemetry environment pointing at an in-process
// OTLP collector (the plugin reads the runtime's environment, here the
// test's, to turn its tracing on, and hands its spans to the agent, which
// exports them), makes pods need new ENIs, and finds in what the collector
// received: each agent's CNI ADD spans, the broker's EC2 actions each with
// the EC2 calls it made as children and linked to the SetDemand call whose
// demand it answers — and one waiting ADD's whole story in one trace: the
// plugin's ADD, the agent's ADD under it, the demand the agent stated
// while the ADD waited (its call and the broker's side of it), the EC2
// action that answered it (linked to that demand, its EC2 calls under it),
// the delivery joining the pool, and the ADD answering after all that.
func TestTracesReachACollector(t *testing.T) {
	rcv, err := telemetrytest.NewReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	// libcni runs the plugin with the runtime's environment, as
	// containerd and CRI-O do.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.Endpoint())
	cfg := testConfig(t, 2)
	cfg.Env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.Endpoint()}
	// One warm address: the burst's ADDs find the pool empty and wait.
	cfg.Warm = WarmTargets{WarmIPs: 1}
	c := startCluster(t, cfg)
	addAll(t, c, 16, 8, "trc")

	eventually(t, 30*time.Second, "spans of every process, EC2 calls under their action", func() error {
		return actionSpans(rcv.Spans())
	})
	var story []string
	eventually(t, 30*time.Second, "one waiting ADD's trace from the plugin to EC2 and back", func() error {
		var err error
		story, err = waitingAddTrace(rcv.Spans())
		return err
	})
	t.Logf("one waiting ADD's trace:\n  %s", strings.Join(story, "\n  "))
}

// actionSpans checks the spans of every process and the broker's actions.
func actionSpans(spans []telemetrytest.Span) error {
	byID := map[string]telemetrytest.Span{}
	adds, plugin := 0, 0
	for _, s := range spans {
		byID[s.SpanID] = s
		if s.Service == "allot-agent" && s.Name == "allot.v1.CNIService/Add" {
			adds++
		}
		if s.Service == "allot" && s.Name == "allot CNI ADD" {
			plugin++
		}
	}
	if adds < 32 || plugin < 32 {
		return fmt.Errorf("%d agent ADD spans and %d plugin ADD spans of 32 pods", adds, plugin)
	}
	creates := 0
	for _, s := range spans {
		if s.Service != "allot-broker" || s.Name != "EC2 CreateNetworkInterface" {
			continue
		}
		p, ok := byID[s.ParentSpanID]
		if !ok || p.TraceID != s.TraceID || !strings.HasPrefix(p.Name, "allot create") {
			return fmt.Errorf("EC2 create span's parent is %+v, want the broker's create action", p)
		}
		creates++
	}
	if creates == 0 {
		return fmt.Errorf("no EC2 CreateNetworkInterface span yet (%d spans)", len(spans))
	}
	for _, s := range spans {
		if s.Service != "allot-broker" || s.Name != "allot create-attach" {
			continue
		}
		for _, id := range s.LinkSpans {
			if d, ok := byID[id]; ok && d.Name == "allot.v1.NodeService/SetDemand" {
				return nil
			}
		}
	}
	return fmt.Errorf("no create-attach action links to the SetDemand it answers")
}

// waitingAddTrace finds a trace that holds a waiting ADD's whole story and
// returns it, one line a step, or says what no trace has.
func waitingAddTrace(spans []telemetrytest.Span) ([]string, error) {
	byTrace := map[string][]telemetrytest.Span{}
	for _, s := range spans {
		byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
	}
	// The EC2 actions by the demand span they link to.
	actions := map[string][]telemetrytest.Span{}
	for _, s := range spans {
		if s.Service == "allot-broker" && strings.HasPrefix(s.Name, "allot ") {
			for _, id := range s.LinkSpans {
				actions[id] = append(actions[id], s)
			}
		}
	}
	children := map[string][]telemetrytest.Span{}
	for _, s := range spans {
		children[s.ParentSpanID] = append(children[s.ParentSpanID], s)
	}
	best, furthest := "no plugin ADD span", 0
	for _, tr := range byTrace {
		story, missing := storyOf(tr, children, actions)
		if missing == "" {
			return story, nil
		}
		if len(story) > furthest {
			best, furthest = missing, len(story)
		}
	}
	return nil, fmt.Errorf("no trace holds a waiting ADD's story (%d spans); the closest lacks %s", len(spans), best)
}

// storyOf follows one trace from its plugin ADD span; missing names the
// first step not found.
func storyOf(tr []telemetrytest.Span, children, actions map[string][]telemetrytest.Span) (
	story []string, missing string) {
	find := func(parent, service, name string) (telemetrytest.Span, bool) {
		for _, s := range children[parent] {
			if s.Service == service && s.Name == name {
				return s, true
			}
		}
		return telemetrytest.Span{}, false
	}
	step := func(s telemetrytest.Span) {
		story = append(story, fmt.Sprintf("%-13s %-36s %s … %s", s.Service, s.Name,
			s.Start.Format("15:04:05.000"), s.End.Format("15:04:05.000")))
	}
	var root telemetrytest.Span
	for _, s := range tr {
		if s.Service == "allot" && s.Name == "allot CNI ADD" && s.ParentSpanID == "" {
			root = s
		}
	}
	if root.SpanID == "" {
		return nil, "the plugin's ADD span"
	}
	step(root)
	call, ok := find(root.SpanID, "allot", "allot.v1.CNIService/Add")
	if !ok {
		return story, "the plugin's gRPC call to the agent"
	}
	add, ok := find(call.SpanID, "allot-agent", "allot.v1.CNIService/Add")
	if !ok {
		return story, "the agent's ADD under the plugin's call"
	}
	step(add)
	addr, ok := find(add.SpanID, "allot-agent", "allot address")
	if !ok {
		return story, "the agent's address span"
	}
	step(addr)
	stated, ok := find(addr.SpanID, "allot-agent", "allot.v1.NodeService/SetDemand")
	if !ok {
		return story, "a demand stated while the ADD waited"
	}
	demand, ok := find(stated.SpanID, "allot-broker", "allot.v1.NodeService/SetDemand")
	if !ok {
		return story, "the broker's side of the demand"
	}
	step(demand)
	var action, ec2 telemetrytest.Span
	for _, a := range actions[demand.SpanID] {
		for _, e := range children[a.SpanID] {
			if strings.HasPrefix(e.Name, "EC2 ") && e.TraceID == a.TraceID {
				action, ec2 = a, e
			}
		}
	}
	if action.SpanID == "" {
		return story, "an EC2 action linked to the demand, with its EC2 calls"
	}
	story = append(story, "  (link from) "+action.Name+" node "+action.Attributes["allot.node"])
	step(action)
	step(ec2)
	// A waiting ADD may see more than one delivery: the one after the EC2
	// calls is the story's.
	var deliver telemetrytest.Span
	for _, s := range children[addr.SpanID] {
		if s.Service == "allot-agent" && s.Name == "allot deliver" && !s.End.Before(ec2.End) {
			deliver = s
		}
	}
	if deliver.SpanID == "" {
		return story, "a delivery joining the pool after the EC2 calls"
	}
	step(deliver)
	if add.End.Before(deliver.End) || root.End.Before(add.End) {
		return story, "the ADD answering after the delivery"
	}
	story = append(story, "the ADD answers at "+add.End.Format("15:04:05.000"))
	return story, ""
}
