package burst

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/world"
)

// burst requests PodsPerNode pods on every node as the profile has them
// arrive, each retried as kubelet retries, and returns when all have an
// address or the deadline passed. The nodes of late join during the burst
// (the join profile), and their pods are requested once they have joined.
// tick is called every few wall seconds with the pods placed so far.
func burst(ctx context.Context, cfg Config, prof Profile, f fleet, late []awssim.AdminInstance, tick func(placed int, elapsed time.Duration)) ([]podResult, map[string]int, time.Duration, error) {
	k := defaultKubelet(cfg.TimeScale)
	bctx, cancel := context.WithTimeout(ctx, cfg.wall(cfg.Deadline))
	defer cancel()
	present := f.backends()
	nodes := append(slices.Clone(present), make([]cni, len(late))...)
	ready := make([]chan struct{}, len(nodes))
	for i := range ready {
		ready[i] = make(chan struct{})
		if i < len(present) {
			close(ready[i])
		}
	}
	per := cfg.PodsPerNode
	results := make([]podResult, len(nodes)*per)
	var placed atomic.Int64
	var fails failures
	var wg sync.WaitGroup
	// Every pod's goroutine is made first and waits at the gate; closing it
	// starts the burst. Made and started in one loop, the later pods would
	// reach their node up to a second of wall time after the first (the
	// loop shares the CPU with the ADDs it started), which is not "at once"
	// and would show up as the system's latency.
	gate := make(chan struct{})
	var start time.Time
	for i := range nodes {
		for p := range per {
			wg.Go(func() {
				<-gate
				at := start.Add(cfg.wall(prof.requestAt(i, p, len(present))))
				select {
				case <-ready[i]:
				case <-bctx.Done():
					results[i*per+p] = podResult{Node: i, Pod: p}
					return
				}
				at = later(at, time.Now())
				if i < len(present) {
					sleepUntil(bctx, at)
				}
				r := runPod(bctx, k, nodes[i], i, p, at, start, &fails)
				results[i*per+p] = r
				if r.Placed {
					placed.Add(1)
				}
			})
		}
	}
	var joinErr error
	start = time.Now()
	close(gate)
	if len(late) > 0 {
		wg.Go(func() { joinErr = joinLate(bctx, cfg, f, late, len(present), start, nodes, ready) })
	}
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
			return results, fails.snapshot(), time.Since(start), joinErr
		case <-t.C:
			if tick != nil {
				tick(int(placed.Load()), time.Since(start))
			}
		}
	}
}

// joinLate joins the late nodes in their batches (joinAt) and opens each
// one's pods once it has joined.
func joinLate(ctx context.Context, cfg Config, f fleet, late []awssim.AdminInstance, present int, start time.Time, nodes []cni, ready []chan struct{}) error {
	for i := 0; i < len(late); {
		j := i
		for j < len(late) && joinAt(j, len(late)) == joinAt(i, len(late)) {
			j++
		}
		sleepUntil(ctx, start.Add(cfg.wall(joinAt(i, len(late)))))
		if err := f.join(ctx, late[i:j]); err != nil {
			return fmt.Errorf("late nodes %d to %d: %w", i, j, err)
		}
		all := f.backends()
		for n := present + i; n < present+j && n < len(all); n++ {
			nodes[n] = all[n]
			close(ready[n])
		}
		i = j
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// sleepUntil waits until t or ctx's end.
func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
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
