package cni

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/allotnet/allot/agent/e2e/harness"
)

var (
	podsFlag = flag.Int("pods", 100, "pods per plugin: ADDs (and DELs) measured for each")
	refDir   = flag.String("ref-dir", "", "directory holding ptp and host-local (installed there if missing); default a temporary one")
	jsonOut  = flag.String("json", "", "also write the JSON line to this file")
)

// subject is one plugin under measurement: a runtime configured for it and
// a sandbox per pod.
type subject struct {
	name     string
	rt       *harness.Runtime
	pods     []*harness.Pod
	add, del []time.Duration
	// status is measured for plugins that implement STATUS (CNI 1.1).
	status        []time.Duration
	measureStatus bool
	skipped       string
	// agent, for allot, is read for its own account of each phase.
	agent *harness.Agent
}

// readAgent reads allot's agent's totals, or nil when there is no agent.
func readAgent(b *testing.B, ctx context.Context, subjects []*subject) promTotals {
	for _, s := range subjects {
		if s.agent == nil || s.skipped != "" {
			continue
		}
		body, err := s.agent.Get(ctx, "/metrics")
		if err != nil {
			b.Fatalf("agent metrics: %v", err)
		}
		t, err := parseTotalsBytes(body)
		if err != nil {
			b.Fatal(err)
		}
		return t
	}
	return nil
}

// BenchmarkCNILatency measures ADD and DEL through each plugin binary, as a
// runtime executes it, in real namespaces: allot (plugin → agent → netlink,
// the agent's warm pool filled beforehand, so ADDs take the hot path) and
// ptp + host-local. Calls alternate between the plugins so both see the
// same noise; each plugin's ADD follows the other's, as its DEL does.
// allot's STATUS (an exec and an RPC doing no work) is measured too, in a
// loop of its own before the ADDs, as the floor under its ADD and DEL. Run
// it with `make bench-cni`; it ignores b.N (use -benchtime 1x) and
// measures -pods pods per plugin.
func BenchmarkCNILatency(b *testing.B) {
	harness.RequireRoot(b)
	n := *podsFlag
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	bins, err := harness.BuildBinaries()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bins.Remove() })

	subjects := []*subject{allotSubject(b, bins, n), ptpSubject(b, ctx)}
	for _, s := range subjects {
		if s.skipped == "" {
			// One untimed ADD and DEL per plugin first: the first exec of a
			// binary pays for page faults nobody else would.
			warm := harness.NewPod(b, "bench", "warmup-"+s.name)
			if _, err := s.rt.Add(ctx, warm); err != nil {
				b.Fatalf("%s warm-up ADD: %v", s.name, err)
			}
			if err := s.rt.Del(ctx, warm); err != nil {
				b.Fatalf("%s warm-up DEL: %v", s.name, err)
			}
			for i := range n {
				s.pods = append(s.pods, harness.NewPod(b, "bench", fmt.Sprintf("%s-%d", s.name, i)))
			}
		}
	}

	b.ResetTimer()
	// STATUS first, in a loop of its own: a runtime does not run it before
	// each ADD (containerd asks every few seconds), and run just before an
	// ADD it would warm allot's binary and agent for the ADD measured next.
	for range n {
		for _, s := range subjects {
			if s.skipped != "" || !s.measureStatus {
				continue
			}
			start := time.Now()
			if err := s.rt.Status(ctx); err != nil {
				b.Fatalf("%s STATUS: %v", s.name, err)
			}
			s.status = append(s.status, time.Since(start))
		}
	}
	atStart := readAgent(b, ctx, subjects)
	for i := range n {
		for _, s := range subjects {
			if s.skipped != "" {
				continue
			}
			start := time.Now()
			if _, err := s.rt.Add(ctx, s.pods[i]); err != nil {
				b.Fatalf("%s ADD %d: %v", s.name, i, err)
			}
			s.add = append(s.add, time.Since(start))
		}
	}
	afterAdds := readAgent(b, ctx, subjects)
	for i := range n {
		for _, s := range subjects {
			if s.skipped != "" {
				continue
			}
			start := time.Now()
			if err := s.rt.Del(ctx, s.pods[i]); err != nil {
				b.Fatalf("%s DEL %d: %v", s.name, i, err)
			}
			s.del = append(s.del, time.Since(start))
		}
	}
	b.StopTimer()
	afterDels := readAgent(b, ctx, subjects)

	rep := Report{Pods: n}
	if atStart != nil {
		rep.AgentAdds, rep.AgentDels = agentSide(atStart, afterAdds), agentSide(afterAdds, afterDels)
	}
	for _, s := range subjects {
		r := Result{Plugin: s.name, Skipped: s.skipped, Add: Summarize(s.add), Del: Summarize(s.del), Status: Summarize(s.status)}
		rep.Results = append(rep.Results, r)
		if s.skipped == "" {
			b.ReportMetric(ms(r.Add.P50), s.name+"-add-p50-ms")
			b.ReportMetric(ms(r.Add.P99), s.name+"-add-p99-ms")
			b.ReportMetric(ms(r.Del.P50), s.name+"-del-p50-ms")
			b.ReportMetric(ms(r.Del.P99), s.name+"-del-p99-ms")
		}
	}
	fmt.Println()
	if err := rep.WriteTable(os.Stdout); err != nil {
		b.Fatal(err)
	}
	line, err := rep.JSON()
	if err != nil {
		b.Fatal(err)
	}
	fmt.Println(string(line))
	if *jsonOut != "" {
		if err := os.WriteFile(*jsonOut, append(line, '\n'), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// ptpSubject installs the reference plugins and runs them in a "host"
// namespace of their own, with host-local's state in a temporary directory.
func ptpSubject(b *testing.B, ctx context.Context) *subject {
	s := &subject{name: "ptp+host-local"}
	dir := *refDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", harness.Prefix+"-ref-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	if err := InstallReference(ctx, dir); err != nil {
		b.Fatal(err)
	}
	host := harness.NewNetNS(b, "ptp-host")
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "bench-ptp",
  "plugins": [{
    "type": "ptp",
    "ipMasq": false,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": "10.200.0.0/16"}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": %q
    }
  }]
}`, b.TempDir())
	list, err := libcni.ConfListFromBytes([]byte(conf))
	if err != nil {
		b.Fatal(err)
	}
	s.rt = harness.NewRuntime(b, dir, list, host)
	return s
}

// allotSubject starts the whole allot stack with a warm pool big enough
// for every pod, so each ADD is served from the pool.
func allotSubject(b *testing.B, bins *harness.Binaries, n int) *subject {
	s := &subject{name: "allot", measureStatus: true}
	if bins.AgentErr != nil {
		s.skipped = fmt.Sprintf("%v: %v", harness.ErrNoAgent, firstLine(bins.AgentErr.Error()))
		return s
	}
	env := harness.NewEnv(b, bins, harness.EnvConfig{
		// m5.24xlarge: 15 ENIs of 50 addresses, room for hundreds of pods.
		Cloud: harness.CloudConfig{InstanceType: "m5.24xlarge"},
		// Info-level logs, as deployed: debug logs per call would tax allot.
		Agent: harness.AgentConfig{WarmIPs: n + 1, MinimumIPs: n + 1, Cooldown: -1, LogLevel: "info"},
	})
	s.rt, s.agent = env.Runtime, env.Agent
	return s
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}
