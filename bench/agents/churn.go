package agents

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/allotnet/allot/deploy/cluster"
)

// ChurnFigures are one node replacing its pods through the CNI plugin:
// each replacement is a DEL of a running pod (and its namespace removed)
// then an ADD of a new sandbox in a new namespace, as a rolling update
// does.
type ChurnFigures struct {
	Node     string  `json:"node"`
	Pods     int     `json:"pods"`
	Parallel int     `json:"parallel"`
	Seconds  float64 `json:"seconds"`
	// Replacements completed; ADDs and DELs per second are each
	// Replacements / Seconds.
	Replacements int     `json:"replacements"`
	PerSecond    float64 `json:"per_second"`
	// AddMs and DelMs are the plugin calls' latencies as the runtime saw
	// them (libcni executing the plugin).
	AddMs cluster.Percentiles `json:"add_ms"`
	DelMs cluster.Percentiles `json:"del_ms"`
	// AgentCPUPct is the agent's CPU over the churn, in percent of a core.
	AgentCPUPct float64 `json:"agent_cpu_pct"`
	// DistinctAtEnd is how many distinct addresses the node's pods hold
	// at the end (equal to Pods when none is shared).
	DistinctAtEnd int `json:"distinct_at_end"`
}

// churn replaces the node's pods, parallel at a time, for d.
func churn(ctx context.Context, c *cluster.Cluster, n *cluster.Node, all []*cluster.Pod, parallel int, d time.Duration) (*ChurnFigures, []*cluster.Pod, error) {
	var others []*cluster.Pod
	queue := make(chan *cluster.Pod, len(all))
	for _, p := range all {
		if p.Node == n {
			queue <- p
		} else {
			others = append(others, p)
		}
	}
	f := &ChurnFigures{Node: n.Name, Pods: len(queue), Parallel: parallel}
	if f.Pods == 0 {
		return nil, all, fmt.Errorf("no pod on %s to replace", n.Name)
	}
	var (
		mu         sync.Mutex
		adds, dels []time.Duration
		errs       []error
	)
	deadline := time.Now().Add(d)
	replace := func(p *cluster.Pod) (*cluster.Pod, error) {
		t := time.Now()
		if err := c.DeletePod(ctx, p); err != nil {
			return nil, err
		}
		dd := time.Since(t)
		np, err := c.NewPod(n, p.Name)
		if err != nil {
			return nil, err
		}
		t = time.Now()
		if err := c.AddPod(ctx, np); err != nil {
			return nil, err
		}
		mu.Lock()
		adds, dels = append(adds, time.Since(t)), append(dels, dd)
		mu.Unlock()
		return np, nil
	}
	win, err := sampleOver(ctx, []*cluster.Node{n}, 0, func() error {
		var wg sync.WaitGroup
		for range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) && ctx.Err() == nil {
					np, err := replace(<-queue)
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
					queue <- np
				}
			}()
		}
		wg.Wait()
		f.Seconds = time.Since(deadline.Add(-d)).Seconds()
		return errors.Join(errs...)
	})
	var held []string
	close(queue)
	for p := range queue {
		held = append(held, p.Addr.String())
		others = append(others, p)
	}
	if err != nil {
		return f, others, fmt.Errorf("churn on %s: %w", n.Name, err)
	}
	f.Replacements = len(adds)
	f.PerSecond = float64(f.Replacements) / f.Seconds
	f.AddMs, f.DelMs = cluster.PercentilesOf(adds), cluster.PercentilesOf(dels)
	f.AgentCPUPct = win[0].cpuPct()
	slices.Sort(held)
	f.DistinctAtEnd = len(slices.Compact(held))
	return f, others, nil
}
