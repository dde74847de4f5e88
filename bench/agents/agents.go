// Package agents measures allot-agent as the process a node runs: N real
// agents, each with its node's namespace, host networking done with
// netlink and pods created through the allot CNI plugin, against the real
// broker and awssim with TLS and node attestation on (deploy/cluster, the
// machinery of `make demo`). It reads each agent's memory (VmRSS, VmHWM)
// and CPU time (utime+stime) from /proc idle, during a burst of pods and
// idle again with the pods running, then the rate at which one node
// replaces its pods, and the pool's own rate with its checkpoint on disk,
// with group commit and with every change written alone.
package agents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"time"

	"github.com/allotnet/allot/bench/burst"
	"github.com/allotnet/allot/deploy/cluster"
)

// Defaults of Config.
const (
	DefaultNodes       = 3
	DefaultPodsPerNode = 110
	DefaultParallel    = 4
	DefaultIdle        = 10 * time.Second
	DefaultChurn       = 20 * time.Second
	// TargetPeakRSSMiB is the most an agent may peak at (VmHWM) with 110
	// pods in prefix mode.
	TargetPeakRSSMiB = 30
)

// Config is one run.
type Config struct {
	Cluster cluster.Config
	// PodsPerNode are created on every node in one burst; default 110.
	PodsPerNode int
	// Parallel bounds the ADDs (and, in the churn, the replacements) in
	// flight per node; default 4.
	Parallel int
	// Idle is how long CPU is measured with nothing happening, before the
	// burst and after it; default 10 s.
	Idle time.Duration
	// Churn is how long the first node replaces its pods (DEL, then ADD
	// of a new sandbox); default 20 s, negative skips it.
	Churn time.Duration
	// Pool configures the in-process pool benchmark; a zero Duration
	// skips it.
	Pool PoolConfig
	// Progress receives one line per phase; nil discards them.
	Progress io.Writer
}

// AgentFigures are one agent process's figures.
type AgentFigures struct {
	Node string `json:"node"`
	Pid  int    `json:"pid"`
	// IdleRSSMiB is VmRSS with the warm pool filled and no pod;
	// LoadedRSSMiB with every pod of the burst running, idle again.
	IdleRSSMiB   float64 `json:"idle_rss_mib"`
	LoadedRSSMiB float64 `json:"loaded_rss_mib"`
	// BurstPeakRSSMiB is VmHWM after the ADD burst; PeakRSSMiB at the
	// end, after the churn and every pod deleted at once: the most the
	// process was ever resident. EndRSSMiB is VmRSS then.
	BurstPeakRSSMiB float64 `json:"burst_peak_rss_mib"`
	PeakRSSMiB      float64 `json:"peak_rss_mib"`
	EndRSSMiB       float64 `json:"end_rss_mib"`
	// LoadedAnonMiB and LoadedFileMiB split LoadedRSSMiB: anonymous
	// memory (heap, stacks, the runtime's) and file pages (the mapped
	// binary).
	LoadedAnonMiB float64 `json:"loaded_anon_mib"`
	LoadedFileMiB float64 `json:"loaded_file_mib"`
	// EndThreads is the process's OS threads at the end (Go keeps a
	// thread it made, so this is about the most it ever had).
	EndThreads int `json:"end_threads"`
	// CPU in percent of one core: idle without pods, over the burst, and
	// idle with the pods running.
	IdleCPUPct   float64 `json:"idle_cpu_pct"`
	BurstCPUPct  float64 `json:"burst_cpu_pct"`
	LoadedCPUPct float64 `json:"loaded_cpu_pct"`
	// BurstCPUSeconds is the CPU time the burst cost the agent.
	BurstCPUSeconds float64 `json:"burst_cpu_seconds"`
	// DelBurstCPUSeconds is the CPU time of deleting every pod at once.
	DelBurstCPUSeconds float64 `json:"del_burst_cpu_seconds"`
}

// Report is a run's figures.
type Report struct {
	Nodes        int     `json:"nodes"`
	PodsPerNode  int     `json:"pods_per_node"`
	Parallel     int     `json:"parallel"`
	Mode         string  `json:"mode"`
	InstanceType string  `json:"instance_type"`
	TimeScale    float64 `json:"time_scale"`
	// Pods is how many ADDs succeeded in the burst, DistinctAddrs how
	// many addresses they got (equal when no address was handed out
	// twice), Failed how many ADDs failed.
	Pods          int            `json:"pods"`
	DistinctAddrs int            `json:"distinct_addrs"`
	Failed        int            `json:"failed"`
	BurstSeconds  float64        `json:"burst_seconds"`
	Agents        []AgentFigures `json:"agents"`
	// MaxPeakRSSMiB is the largest agent's VmHWM, against
	// TargetPeakRSSMiB.
	MaxPeakRSSMiB    float64       `json:"max_peak_rss_mib"`
	TargetPeakRSSMiB float64       `json:"target_peak_rss_mib"`
	Churn            *ChurnFigures `json:"churn,omitempty"`
	Pool             []PoolFigures `json:"pool,omitempty"`
	// CheckpointFS says where the agents' checkpoints were: the mount's
	// source and type.
	CheckpointFS string `json:"checkpoint_fs"`
	// LoadBefore and LoadAfter are the 1-minute load averages.
	LoadBefore float64 `json:"load_before"`
	LoadAfter  float64 `json:"load_after"`
	Seconds    float64 `json:"seconds"`
}

func (c Config) withDefaults() Config {
	if c.Cluster.Nodes == 0 {
		c.Cluster.Nodes = DefaultNodes
	}
	if c.Cluster.Mode == "" {
		c.Cluster.Mode = cluster.ModePrefix
	}
	if c.Cluster.InstanceType == "" {
		c.Cluster.InstanceType = "c5.xlarge"
	}
	if c.Cluster.Stem == "" {
		c.Cluster.Stem = "allot-bagents-"
	}
	if c.PodsPerNode == 0 {
		c.PodsPerNode = DefaultPodsPerNode
	}
	if c.Parallel == 0 {
		c.Parallel = DefaultParallel
	}
	if c.Idle == 0 {
		c.Idle = DefaultIdle
	}
	if c.Churn == 0 {
		c.Churn = DefaultChurn
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Cluster.Logger == nil {
		c.Cluster.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Run runs the benchmark and returns its report; every namespace, link
// and process it created is gone when it returns.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg = cfg.withDefaults()
	if cfg.PodsPerNode < 1 || cfg.Parallel < 1 {
		return nil, errors.New("pods per node and parallel must be at least 1")
	}
	say := func(f string, a ...any) { fmt.Fprintf(cfg.Progress, "-- "+f+"\n", a...) }
	t0 := time.Now()
	rep = &Report{PodsPerNode: cfg.PodsPerNode, Parallel: cfg.Parallel, TargetPeakRSSMiB: TargetPeakRSSMiB,
		LoadBefore: loadAverage()}
	if cfg.Pool.Duration > 0 {
		say("pool alone, checkpoint in %s: %d pods churning, %d at a time, %v per mode",
			cfg.Pool.dir(), cfg.PodsPerNode, cfg.Pool.workers(), cfg.Pool.Duration)
		if rep.Pool, err = RunPool(ctx, cfg.Pool, cfg.PodsPerNode); err != nil {
			return rep, err
		}
	}
	say("starting awssim, allot-broker and %d allot-agents (%s mode)", cfg.Cluster.Nodes, cfg.Cluster.Mode)
	c, err := cluster.Start(ctx, cfg.Cluster)
	if err != nil {
		return rep, err
	}
	defer func() {
		err = errors.Join(err, c.Close())
		rep.LoadAfter, rep.Seconds = loadAverage(), time.Since(t0).Seconds()
	}()
	rep.Nodes, rep.Mode, rep.InstanceType, rep.TimeScale = len(c.Nodes), cfg.Cluster.Mode, cfg.Cluster.InstanceType, cfg.Cluster.TimeScale
	rep.CheckpointFS = mountOf(c.Nodes[0].Agent.Checkpoint)
	return rep, measure(ctx, cfg, c, rep, say)
}

// measure runs the phases on a started cluster.
func measure(ctx context.Context, cfg Config, c *cluster.Cluster, rep *Report, say func(string, ...any)) error {
	agents := c.Nodes
	for _, n := range c.Nodes {
		rep.Agents = append(rep.Agents, AgentFigures{Node: n.Name, Pid: n.Agent.Pid()})
	}
	say("idle for %v with warm pools filled", cfg.Idle)
	idle, err := sampleOver(ctx, agents, cfg.Idle, nil)
	if err != nil {
		return err
	}
	say("burst: %d pods per node, %d ADDs in flight per node", cfg.PodsPerNode, cfg.Parallel)
	var results []cluster.AddResult
	burstStart := time.Now()
	bursts, err := sampleOver(ctx, agents, 0, func() error {
		var err error
		results, err = c.AddPods(ctx, cfg.PodsPerNode, cfg.Parallel, "bench")
		return err
	})
	if err != nil {
		return err
	}
	rep.BurstSeconds = time.Since(burstStart).Seconds()
	addrs := map[netip.Addr]bool{}
	var pods []*cluster.Pod
	for _, r := range results {
		if r.Err != nil {
			rep.Failed++
			continue
		}
		rep.Pods++
		addrs[r.Pod.Addr] = true
		pods = append(pods, r.Pod)
	}
	rep.DistinctAddrs = len(addrs)
	say("%d pods up in %.1f s (%d failed); idle for %v with them running", rep.Pods, rep.BurstSeconds, rep.Failed, cfg.Idle)
	loaded, err := sampleOver(ctx, agents, cfg.Idle, nil)
	if err != nil {
		return err
	}
	for i := range agents {
		f := &rep.Agents[i]
		f.IdleRSSMiB, f.IdleCPUPct = mib(idle[i].end.RSSBytes), idle[i].cpuPct()
		f.BurstCPUPct, f.BurstCPUSeconds = bursts[i].cpuPct(), bursts[i].cpuSeconds()
		f.LoadedRSSMiB, f.LoadedCPUPct = mib(loaded[i].end.RSSBytes), loaded[i].cpuPct()
		// The kernel raises VmHWM lazily (on an unmap, or when read, to
		// the RSS of that moment), so a VmRSS read earlier can exceed a
		// later VmHWM by a few pages: a peak is at least every RSS read.
		f.BurstPeakRSSMiB = max(mib(loaded[i].end.PeakRSSBytes), f.LoadedRSSMiB, f.IdleRSSMiB)
		f.LoadedAnonMiB, f.LoadedFileMiB, _ = rssSplit(f.Pid)
	}
	if rep.Failed > 0 {
		return fmt.Errorf("%d of %d ADDs failed; first: %w", rep.Failed, len(results), firstErr(results))
	}
	if cfg.Churn > 0 {
		say("churn on %s: its %d pods replaced, %d at a time, for %v", c.Nodes[0].Name, cfg.PodsPerNode, cfg.Parallel, cfg.Churn)
		if rep.Churn, pods, err = churn(ctx, c, c.Nodes[0], pods, cfg.Parallel, cfg.Churn); err != nil {
			return err
		}
	}
	say("deleting all %d pods at once, as `make demo` does", len(pods))
	dels, err := sampleOver(ctx, agents, 0, func() error { return errors.Join(c.DeletePods(ctx, pods)...) })
	if err != nil {
		return err
	}
	for i := range agents {
		f := &rep.Agents[i]
		f.DelBurstCPUSeconds = dels[i].cpuSeconds()
		f.EndRSSMiB = mib(dels[i].end.RSSBytes)
		f.PeakRSSMiB = max(mib(dels[i].end.PeakRSSBytes), f.EndRSSMiB, f.BurstPeakRSSMiB)
		_, _, f.EndThreads = rssSplit(f.Pid)
		rep.MaxPeakRSSMiB = max(rep.MaxPeakRSSMiB, f.PeakRSSMiB)
	}
	return nil
}

func firstErr(rs []cluster.AddResult) error {
	for _, r := range rs {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// window is one agent's /proc readings at the start and end of a phase.
type window struct {
	start, end burst.ProcStats
	wall       time.Duration
}

func (w window) cpuSeconds() float64 { return w.end.CPUSeconds - w.start.CPUSeconds }
func (w window) cpuPct() float64 {
	if w.wall <= 0 {
		return 0
	}
	return 100 * w.cpuSeconds() / w.wall.Seconds()
}

// sampleOver reads the figures of every node's agent, then waits d or runs do, then
// reads them again.
func sampleOver(ctx context.Context, agents []*cluster.Node, d time.Duration, do func() error) ([]window, error) {
	out := make([]window, len(agents))
	read := func(set func(*window, burst.ProcStats)) error {
		for i, a := range agents {
			st, err := burst.PidProcStats(a.Agent.Pid())
			if err != nil {
				return fmt.Errorf("%s: %w", a.Name, err)
			}
			set(&out[i], st)
		}
		return nil
	}
	if err := read(func(w *window, s burst.ProcStats) { w.start = s }); err != nil {
		return nil, err
	}
	t := time.Now()
	if do != nil {
		if err := do(); err != nil {
			return nil, err
		}
	} else {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(d):
		}
	}
	wall := time.Since(t)
	err := read(func(w *window, s burst.ProcStats) { w.end, w.wall = s, wall })
	return out, err
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
