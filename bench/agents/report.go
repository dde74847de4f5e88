package agents

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteText prints the report as tables.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\nallot-agent as processes: %d nodes (%s, %s mode), %d pods per node, %d ADDs in flight per node, time scale %g\n",
		r.Nodes, r.InstanceType, r.Mode, r.PodsPerNode, r.Parallel, r.TimeScale)
	fmt.Fprintf(w, "burst: %d pods in %.1f s, %d distinct addresses, %d failed; checkpoints on %s\n\n",
		r.Pods, r.BurstSeconds, r.DistinctAddrs, r.Failed, r.CheckpointFS)
	fmt.Fprintf(w, "%-8s %7s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "agent", "pid", "idle RSS", "pods RSS", "burst HWM",
		"peak HWM", "end RSS", "idle CPU", "burst CPU", "pods CPU", "ADDs CPU", "DELs CPU")
	fmt.Fprintf(w, "%-8s %7s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "", "", "MiB", "MiB", "MiB", "MiB", "MiB", "%", "%", "%", "s", "s")
	for _, a := range r.Agents {
		fmt.Fprintf(w, "%-8s %7d %9.1f %9.1f %9.1f %9.1f %9.1f %9.2f %9.1f %9.2f %9.2f %9.2f\n", a.Node, a.Pid, a.IdleRSSMiB,
			a.LoadedRSSMiB, a.BurstPeakRSSMiB, a.PeakRSSMiB, a.EndRSSMiB, a.IdleCPUPct, a.BurstCPUPct, a.LoadedCPUPct,
			a.BurstCPUSeconds, a.DelBurstCPUSeconds)
	}
	for _, a := range r.Agents {
		fmt.Fprintf(w, "%s with its pods: %.1f MiB anonymous (heap, stacks, runtime), %.1f MiB file pages (its binary); %d threads at the end\n",
			a.Node, a.LoadedAnonMiB, a.LoadedFileMiB, a.EndThreads)
	}
	verdict := "met"
	if r.MaxPeakRSSMiB > r.TargetPeakRSSMiB {
		verdict = "MISSED"
	}
	fmt.Fprintf(w, "largest peak %.1f MiB against a target of %.0f MiB: %s\n", r.MaxPeakRSSMiB, r.TargetPeakRSSMiB, verdict)
	if c := r.Churn; c != nil {
		fmt.Fprintf(w, "\nchurn on %s through the plugin: %d pods, %d replacements in flight, %.1f s\n", c.Node, c.Pods, c.Parallel, c.Seconds)
		fmt.Fprintf(w, "  %d replacements: %.1f ADD/s and %.1f DEL/s; ADD p50 %.1f ms p99 %.1f ms; DEL p50 %.1f ms p99 %.1f ms; agent CPU %.1f%%; %d distinct addresses at the end\n",
			c.Replacements, c.PerSecond, c.PerSecond, c.AddMs.P50, c.AddMs.P99, c.DelMs.P50, c.DelMs.P99, c.AgentCPUPct, c.DistinctAtEnd)
	}
	if len(r.Pool) > 0 {
		fmt.Fprintf(w, "\npool alone, checkpoint on %s\n", r.Pool[0].CheckpointFS)
		fmt.Fprintf(w, "%-13s %5s %8s %8s %10s %8s %13s %12s %12s\n", "mode", "pods", "workers", "changes", "ADD+DEL/s", "writes",
			"changes/write", "write p50 ms", "write p99 ms")
		for _, p := range r.Pool {
			fmt.Fprintf(w, "%-13s %5d %8d %8d %10.1f %8d %13.2f %12.2f %12.2f\n", p.Mode, p.Pods, p.Workers, p.Changes, p.PerSecond,
				p.Writes, p.ChangesPerWrite, p.WriteMs.P50, p.WriteMs.P99)
		}
	}
	fmt.Fprintf(w, "\nload average %.2f before, %.2f after; %.0f s in all\n", r.LoadBefore, r.LoadAfter, r.Seconds)
}

// WriteJSON prints the report as one JSON line.
func (r *Report) WriteJSON(w io.Writer) error { return json.NewEncoder(w).Encode(r) }
