// Package scale is allot's scale benchmark: the burst benchmark's fleet
// (bench/burst: every node the real agent with a kernel-free recorder,
// many per process, the real gRPC protocol with TLS and attestation)
// grown to thousands of nodes against the real broker in a process of its
// own, its embedded etcd, and awssim. It reports what a cluster that size
// costs the broker: planning rounds, the broker's memory, the etcd writes
// of an idle fleet, and the burst's time against its floor, each next to a
// target.
package scale

import (
	"fmt"
	"io"
	"time"

	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/bench/burst"
)

// Defaults of the full-size run: 150,000 pods on 5,000 nodes.
const (
	DefaultNodes       = 5000
	DefaultPodsPerNode = 30
	// DefaultTimeScale compresses time less than the burst benchmark's
	// largest scales: every agent timer (heartbeats, usage reports) runs
	// this much faster, and 5,000 agents share the harness's cores.
	DefaultTimeScale = 5
	// DefaultIdleWindow is how long the idle fleet's etcd writes are
	// counted, simulated: several heartbeat intervals.
	DefaultIdleWindow = time.Minute
)

// Targets are what a run is held to.
type Targets struct {
	RoundP99Ms       float64 `json:"round_p99_ms"`
	BrokerRSSMiB     float64 `json:"broker_rss_mib"`
	IdleWritesPerSec float64 `json:"idle_etcd_writes_per_s"`
	BurstRatio       float64 `json:"burst_ratio"`
}

// DefaultTargets are the scale targets at 5,000 nodes.
var DefaultTargets = Targets{RoundP99Ms: 100, BrokerRSSMiB: 500, IdleWritesPerSec: 100, BurstRatio: 1.10}

// BurstConfig is the burst benchmark's run for a scale point: one variant
// (allot, secondary IPs, the whole bucket share), no baseline, with the
// idle window measured before the burst.
func BurstConfig(nodes, podsPerNode int, scale float64, idle time.Duration) burst.Config {
	return burst.Config{
		Nodes: nodes, PodsPerNode: podsPerNode, TimeScale: scale,
		Modes: []daemon.Mode{daemon.ModeSecondaryIP}, Shares: []float64{1},
		IdleWindow: idle, EtcdFsync: true,
		// Nodes join in larger batches than the burst benchmark's: the
		// warm-up is not what is measured here.
		JoinBatch: 500,
		// The pools are back at their warm targets only after the
		// top-ups' calls, thousands of new ENIs at 5 a second: wait
		// for them past that floor, and say when they got there.
		WarmUntilFloor: true,
	}
}

// Figures are one scale point's results, next to the targets.
type Figures struct {
	Nodes       int                `json:"nodes"`
	Pods        int                `json:"pods"`
	Placed      int                `json:"placed"`
	TimeScale   float64            `json:"time_scale"`
	Rounds      int64              `json:"rounds"`
	RoundP50Ms  float64            `json:"round_p50_ms"`
	RoundP99Ms  float64            `json:"round_p99_ms"`
	SlowRounds  int64              `json:"slow_rounds"`
	SlowRoundMs map[string]float64 `json:"slow_round_ms,omitempty"`
	// RoundCPUP50Ms and RoundCPUP99Ms are the rounds' quantiles by the
	// processor time each ran, SlowRoundCPUMs that of the rounds over
	// 50 ms (0: not read). The target is on the wall time; these say how
	// much of it was the round's own work.
	RoundCPUP50Ms  float64 `json:"round_cpu_p50_ms"`
	RoundCPUP99Ms  float64 `json:"round_cpu_p99_ms"`
	SlowRoundCPUMs float64 `json:"slow_round_cpu_ms"`
	BrokerRSSMiB   float64 `json:"broker_rss_mib"`
	// Etcd says where etcd ran: EtcdEmbedded (in the broker's process, as
	// allot-broker runs it by default, so BrokerRSSMiB counts etcd's
	// memory too) or EtcdApart (a process of its own, EtcdRSSMiB).
	Etcd       string  `json:"etcd"`
	EtcdRSSMiB float64 `json:"etcd_rss_mib,omitempty"`
	// BrokerMem is where the broker process's memory went, each figure
	// its own peak over the run.
	BrokerMem        *MemMiB            `json:"broker_mem,omitempty"`
	BrokerCores      float64            `json:"broker_cores"`
	IdleWritesPerSec float64            `json:"idle_etcd_writes_per_s"`
	IdleRevsPerSec   float64            `json:"idle_etcd_revisions_per_s"`
	IdleByMethod     map[string]float64 `json:"idle_by_method_per_s,omitempty"`
	CompletionSim    float64            `json:"completion_s"`
	FloorSim         float64            `json:"floor_s"`
	BurstRatio       float64            `json:"burst_ratio"`
	EtcdWritesPerPod float64            `json:"etcd_writes_per_pod"`
	// WarmSim is when every pool was back at its warm targets, from the
	// burst's start (0: not within the wait); WarmFloorSim the floor of
	// the calls that takes; NotWarm the nodes still short when the wait
	// ended.
	WarmSim      float64 `json:"warm_s"`
	WarmFloorSim float64 `json:"warm_floor_s"`
	NotWarm      int     `json:"nodes_not_warm"`
	StatusWrites int64   `json:"status_writes"`
	// RefusedCalls are the agents' calls the broker refused as busy from
	// the burst's start on; MaxAgentCalls its bound (0: its default).
	RefusedCalls  int64 `json:"refused_calls"`
	MaxAgentCalls int   `json:"max_agent_calls,omitempty"`
	// BrokerNice is the broker process's nice value (0: as started, an
	// equal share of the cores with the harness).
	BrokerNice int `json:"broker_nice,omitempty"`
	// CloudNice is awssim's (0: as started).
	CloudNice int    `json:"cloud_nice,omitempty"`
	Problems  int    `json:"problems"`
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
	// Load is the machine's 1-minute load average at the end: the run
	// shares its cores with whatever else ran.
	Load    string          `json:"load"`
	Targets Targets         `json:"targets"`
	Met     map[string]bool `json:"met"`
}

// Where etcd ran (Figures.Etcd).
const (
	EtcdEmbedded = "embedded"
	EtcdApart    = "apart"
)

// MemMiB is burst.MemPeaks in MiB.
type MemMiB struct {
	HeapLive   float64 `json:"heap_live_mib"`
	HeapGoal   float64 `json:"heap_goal_mib"`
	Stacks     float64 `json:"stacks_mib"`
	Goroutines int64   `json:"goroutines"`
	Mapped     float64 `json:"runtime_mapped_mib"`
	RSSAnon    float64 `json:"rss_anon_mib"`
	RSSFile    float64 `json:"rss_file_mib"`
	// GCCPU and CPU are the broker's collector's CPU seconds and all its
	// Go code's, over its life, as the Go runtime estimates them (from the
	// time its processors ran, so on a loaded machine more than the CPU
	// the kernel counts; their ratio is the point); GCCycles its
	// collections.
	GCCPU    float64 `json:"gc_cpu_s"`
	CPU      float64 `json:"go_cpu_s"`
	GCCycles int64   `json:"gc_cycles"`
}

func memMiB(p *burst.MemPeaks) *MemMiB {
	if p == nil || p.Mapped == 0 {
		return nil
	}
	return &MemMiB{
		HeapLive: mib(p.HeapLive), HeapGoal: mib(p.HeapGoal), Stacks: mib(p.Stacks), Goroutines: p.Goroutines,
		Mapped: mib(p.Mapped), RSSAnon: mib(p.RSSAnon), RSSFile: mib(p.RSSFile),
		GCCPU: p.GCCPU, CPU: p.CPU, GCCycles: p.GCCycles,
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// FromResult takes a scale point's figures from the burst result.
func FromResult(r burst.Result, t Targets, load string) Figures {
	f := Figures{
		Nodes: r.Nodes, Pods: r.Pods, Placed: r.Placed, TimeScale: r.TimeScale,
		Rounds: r.Rounds, RoundP50Ms: r.RoundP50, RoundP99Ms: r.RoundP99,
		SlowRounds: r.SlowRounds, SlowRoundMs: r.SlowRoundMs,
		RoundCPUP50Ms: r.RoundCPUP50, RoundCPUP99Ms: r.RoundCPUP99, SlowRoundCPUMs: r.SlowRoundCPUMs,
		BrokerRSSMiB: mib(r.BrokerPeakRSS), BrokerCores: r.BrokerCores,
		Etcd: EtcdEmbedded, BrokerMem: memMiB(r.BrokerMem),
		CompletionSim: r.CompletionSim, FloorSim: r.LowerBoundSim, BurstRatio: r.Ratio,
		EtcdWritesPerPod: r.EtcdWritesPerPod, Problems: len(r.Problems),
		WarmSim: r.WarmSim, WarmFloorSim: r.WarmFloorSim, NotWarm: r.WarmShortAfter,
		StatusWrites: r.EtcdWritesByMethod["PutNodeStatus"] + r.EtcdWritesByMethod["ClearNodeStatus"],
		RefusedCalls: r.RefusedCalls,
		Status:       r.Status, Error: r.Error, Load: load, Targets: t,
	}
	if r.EtcdPeakRSS > 0 {
		f.Etcd, f.EtcdRSSMiB = EtcdApart, mib(r.EtcdPeakRSS)
	}
	if r.Idle != nil {
		f.IdleWritesPerSec, f.IdleRevsPerSec, f.IdleByMethod = r.Idle.WritesPerSec, r.Idle.RevisionsPerSec, r.Idle.ByMethod
	}
	// Nothing counts as met in a run that did not get to the end.
	ok := r.Status == burst.StatusOK
	f.Met = map[string]bool{
		"round_p99":   ok && r.Rounds > 0 && f.RoundP99Ms >= 0 && f.RoundP99Ms <= t.RoundP99Ms,
		"broker_rss":  ok && f.BrokerRSSMiB > 0 && f.BrokerRSSMiB <= t.BrokerRSSMiB,
		"idle_writes": ok && r.Idle != nil && f.IdleWritesPerSec <= t.IdleWritesPerSec,
		"burst_ratio": ok && r.Complete && f.BurstRatio > 0 && f.BurstRatio <= t.BurstRatio,
	}
	return f
}

// WriteTable prints the figures against their targets.
func (f Figures) WriteTable(w io.Writer) {
	met := func(k string) string {
		if f.Met[k] {
			return "met"
		}
		return "MISSED"
	}
	fmt.Fprintf(w, "scale: %d nodes, %d/%d pods placed, time scale %g, status %s, load %s\n",
		f.Nodes, f.Placed, f.Pods, f.TimeScale, f.Status, f.Load)
	if f.BrokerNice != 0 || f.CloudNice != 0 {
		fmt.Fprintf(w, "nice: broker %d, awssim %d, the harness's agents 0 (below 0 the kernel favours a process)\n", f.BrokerNice, f.CloudNice)
	}
	fmt.Fprintf(w, "etcd: %s\n", map[bool]string{
		true:  "in a process of its own (the broker's RSS is the broker's alone)",
		false: "embedded in the broker's process (the broker's RSS includes etcd's)",
	}[f.Etcd == EtcdApart])
	fmt.Fprintf(w, "%-34s %12s %12s %s\n", "figure", "value", "target", "")
	fmt.Fprintf(w, "%-34s %12.1f %12.0f %s\n", "plan round p99 (ms, wall)", f.RoundP99Ms, f.Targets.RoundP99Ms, met("round_p99"))
	fmt.Fprintf(w, "%-34s %12.1f %12s\n", "plan round p50 (ms, wall)", f.RoundP50Ms, "")
	fmt.Fprintf(w, "%-34s %12d %12s\n", "plan rounds in the burst", f.Rounds, "")
	if f.RoundCPUP99Ms != 0 {
		fmt.Fprintf(w, "%-34s %12.1f %12s\n", "plan round p99 (ms, its CPU)", f.RoundCPUP99Ms, "")
		fmt.Fprintf(w, "%-34s %12.1f %12s\n", "plan round p50 (ms, its CPU)", f.RoundCPUP50Ms, "")
	} else {
		fmt.Fprintf(w, "%-34s %12s %12s\n", "plan round CPU", "not read", "(--round-cpu)")
	}
	fmt.Fprintf(w, "%-34s %12d %12s\n", "rounds over 50 ms", f.SlowRounds, "")
	if f.SlowRoundCPUMs != 0 {
		fmt.Fprintf(w, "%-34s %12.0f %12s\n", "  their CPU (ms, summed)", f.SlowRoundCPUMs, "")
	}
	fmt.Fprintf(w, "%-34s %12.1f %12.0f %s\n", "broker peak RSS (MiB, VmHWM)", f.BrokerRSSMiB, f.Targets.BrokerRSSMiB, met("broker_rss"))
	f.writeMemory(w)
	fmt.Fprintf(w, "%-34s %12.1f %12.0f %s\n", "idle etcd writes/s (store calls)", f.IdleWritesPerSec, f.Targets.IdleWritesPerSec, met("idle_writes"))
	fmt.Fprintf(w, "%-34s %12.1f %12s\n", "idle etcd revisions/s", f.IdleRevsPerSec, "")
	fmt.Fprintf(w, "%-34s %12.3f %12.2f %s\n", "burst completion / floor", f.BurstRatio, f.Targets.BurstRatio, met("burst_ratio"))
	fmt.Fprintf(w, "%-34s %12.1f %12s\n", "burst completion (sim s)", f.CompletionSim, "")
	fmt.Fprintf(w, "%-34s %12.1f %12s\n", "burst floor (sim s)", f.FloorSim, "")
	fmt.Fprintf(w, "%-34s %12.1f %12s\n", "all pools warm again (sim s)", f.WarmSim, "")
	fmt.Fprintf(w, "%-34s %12.1f %12s\n", "  floor with the top-ups (sim s)", f.WarmFloorSim, "")
	fmt.Fprintf(w, "%-34s %12d %12s\n", "  nodes not warm when the wait ended", f.NotWarm, "")
	fmt.Fprintf(w, "%-34s %12.2f %12s\n", "broker cores in the burst", f.BrokerCores, "")
	fmt.Fprintf(w, "%-34s %12.3f %12s\n", "etcd writes / pod (burst)", f.EtcdWritesPerPod, "")
	fmt.Fprintf(w, "%-34s %12d %12s\n", "node status writes (burst)", f.StatusWrites, "")
	bound := "default"
	if f.MaxAgentCalls != 0 {
		bound = fmt.Sprint(f.MaxAgentCalls)
	}
	fmt.Fprintf(w, "%-34s %12d %12s\n", "agent calls refused as busy (burst)", f.RefusedCalls, "")
	fmt.Fprintf(w, "%-34s %12s %12s\n", "  bound on agent calls at once", bound, "")
	fmt.Fprintf(w, "%-34s %12d %12s\n", "problems", f.Problems, "")
	if len(f.SlowRoundMs) > 0 {
		fmt.Fprintf(w, "rounds over 50 ms, ms by phase: %v\n", f.SlowRoundMs)
	}
	if len(f.IdleByMethod) > 0 {
		fmt.Fprintf(w, "idle writes/s by method: %v\n", f.IdleByMethod)
	}
	if f.Error != "" {
		fmt.Fprintf(w, "error: %s\n", f.Error)
	}
}

// writeMemory prints where the broker's memory went, and etcd's own RSS
// when it ran apart.
func (f Figures) writeMemory(w io.Writer) {
	if f.Etcd == EtcdApart {
		fmt.Fprintf(w, "%-34s %12.1f %12s\n", "etcd peak RSS (MiB, own process)", f.EtcdRSSMiB, "")
	}
	m := f.BrokerMem
	if m == nil {
		return
	}
	for _, r := range []struct {
		name string
		v    float64
	}{
		{"  broker live heap, peak (MiB)", m.HeapLive},
		{"  broker heap goal, peak (MiB)", m.HeapGoal},
		{"  broker stacks, peak (MiB)", m.Stacks},
		{"  broker Go runtime mapped (MiB)", m.Mapped},
		{"  broker RSS anonymous, peak (MiB)", m.RSSAnon},
		{"  broker RSS file pages, peak (MiB)", m.RSSFile},
	} {
		fmt.Fprintf(w, "%-34s %12.1f %12s\n", r.name, r.v, "")
	}
	fmt.Fprintf(w, "%-34s %12d %12s\n", "  broker goroutines, peak", m.Goroutines, "")
	share := 0.0
	if m.CPU > 0 {
		share = 100 * m.GCCPU / m.CPU
	}
	fmt.Fprintf(w, "%-34s %12s %12s\n", "  broker GC share of Go CPU (est.)",
		fmt.Sprintf("%.1f%% (%.0f/%.0f s)", share, m.GCCPU, m.CPU), "")
	fmt.Fprintf(w, "%-34s %12d %12s\n", "  broker collections", m.GCCycles, "")
}
