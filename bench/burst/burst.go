package burst

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/world"
)

// burst requests PodsPerNode pods on every node at once, each retried as
// kubelet retries, and returns when all have an address or the deadline
// passed. tick is called every few wall seconds with the pods placed so
// far.
func burst(ctx context.Context, cfg Config, nodes []cni, tick func(placed int, elapsed time.Duration)) ([]podResult, map[string]int, time.Duration) {
	k := defaultKubelet(cfg.TimeScale)
	bctx, cancel := context.WithTimeout(ctx, cfg.wall(cfg.Deadline))
	defer cancel()
	per := cfg.PodsPerNode
	results := make([]podResult, len(nodes)*per)
	var placed atomic.Int64
	var fails failures
	var wg sync.WaitGroup
	// Every pod's goroutine is made first and waits at the gate; closing it
	// requests them all at the same instant. Made and started in one loop,
	// the later pods would reach their node up to a second of wall time
	// after the first (the loop shares the CPU with the ADDs it started),
	// which is not "at once" and would show up as the broker's latency.
	gate := make(chan struct{})
	var start time.Time
	for i, b := range nodes {
		for p := range per {
			wg.Go(func() {
				<-gate
				r := runPod(bctx, k, b, i, p, start, &fails)
				results[i*per+p] = r
				if r.Placed {
					placed.Add(1)
				}
			})
		}
	}
	start = time.Now()
	close(gate)
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return results, fails.snapshot(), time.Since(start)
		case <-t.C:
			if tick != nil {
				tick(int(placed.Load()), time.Since(start))
			}
		}
	}
}

// checkAddresses verifies the burst's outcome against EC2 itself: every
// placed pod's address is distinct and is on an ENI EC2 has attached to
// the pod's node (as a secondary address or inside a delegated prefix),
// the very ENI the node named.
func checkAddresses(pods []podResult, insts []awssim.AdminInstance, enis []world.NetworkInterface) []string {
	type home struct{ instance, eni string }
	owner := map[netip.Addr]home{}
	for _, e := range enis {
		if e.Attachment == nil {
			continue
		}
		h := home{e.Attachment.InstanceID, e.ID}
		for _, s := range e.SecondaryIPs {
			if a, err := netip.ParseAddr(s); err == nil {
				owner[a] = h
			}
		}
		for _, s := range e.Prefixes {
			if p, err := netip.ParsePrefix(s); err == nil {
				for a := p.Masked().Addr(); p.Contains(a); a = a.Next() {
					owner[a] = h
				}
			}
		}
	}
	var problems []string
	more := 0
	report := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		} else {
			more++
		}
	}
	seen := map[netip.Addr]podResult{}
	for _, p := range pods {
		if !p.Placed {
			continue
		}
		node := insts[p.Node].ID
		if q, dup := seen[p.Addr]; dup {
			report("address %s given to pod %d/%d and pod %d/%d", p.Addr, q.Node, q.Pod, p.Node, p.Pod)
		}
		seen[p.Addr] = p
		h, ok := owner[p.Addr]
		switch {
		case !ok:
			report("pod %d/%d on %s has %s, which EC2 puts on no attached ENI", p.Node, p.Pod, node, p.Addr)
		case h.instance != node:
			report("pod %d/%d on %s has %s, which EC2 puts on %s", p.Node, p.Pod, node, p.Addr, h.instance)
		case p.ENIID != "" && h.eni != p.ENIID:
			report("pod %d/%d on %s has %s on %s by its node's account, on %s by EC2's", p.Node, p.Pod, node, p.Addr, p.ENIID, h.eni)
		}
	}
	if more > 0 {
		problems = append(problems, fmt.Sprintf("... and %d more address problems", more))
	}
	return problems
}
