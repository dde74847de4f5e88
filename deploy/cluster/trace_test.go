package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/internal/telemetry/telemetrytest"
)

// TestTracesReachACollector runs the broker and the agents with the
// standard OpenTelemetry environment pointing at an in-process OTLP
// collector, makes pods need new ENIs, and finds in what the collector
// received: each agent's CNI ADD spans (service allot-agent), and the
// broker's EC2 actions (service allot-broker) each in one trace with the
// EC2 calls they made as children, linked to the SetDemand call — the
// agent's, propagated to the broker — whose demand they answer.
//
// What it does not find, because allot does not carry it yet: one trace
// from the ADD itself to the EC2 calls (the agent states its demand on its
// own schedule, not inside the waiting ADD).
func TestTracesReachACollector(t *testing.T) {
	rcv, err := telemetrytest.NewReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	cfg := testConfig(t, 2)
	cfg.Env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.Endpoint()}
	c := startCluster(t, cfg)
	addAll(t, c, 16, 8, "trc")

	eventually(t, 30*time.Second, "spans of both services, EC2 calls under their action", func() error {
		spans := rcv.Spans()
		byID := map[string]telemetrytest.Span{}
		adds := 0
		for _, s := range spans {
			byID[s.SpanID] = s
			if s.Service == "allot-agent" && s.Name == "allot.v1.CNIService/Add" {
				adds++
			}
		}
		if adds < 32 {
			return fmt.Errorf("%d agent ADD spans of 32 pods", adds)
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
		linked := 0
		for _, s := range spans {
			if s.Service != "allot-broker" || s.Name != "allot create-attach" {
				continue
			}
			for _, id := range s.LinkSpans {
				d, ok := byID[id]
				if ok && d.Name == "allot.v1.NodeService/SetDemand" {
					linked++
				}
			}
		}
		if linked == 0 {
			return fmt.Errorf("no create-attach action links to the SetDemand it answers")
		}
		return nil
	})
}
