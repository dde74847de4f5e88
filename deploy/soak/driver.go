package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/allotnet/allot/deploy/cluster"
)

// addBound is the longest one ADD may take before the runtime gives up on
// it: the agent's own wait for capacity (50 s) and then some. An ADD that
// neither succeeds nor answers a CNI error within it breaks the
// "every ADD answers" invariant.
const addBound = 90 * time.Second

// drive runs a kubelet-like loop per pod slot on every node until ctx
// ends; a slot holds at most one pod (plus its replacement in flight).
func (s *soak) drive(ctx context.Context) {
	var wg sync.WaitGroup
	for _, n := range s.c.Nodes {
		for k := range s.cfg.SlotsPerNode {
			wg.Add(1)
			rng := rand.New(rand.NewPCG(uint64(s.cfg.Seed), uint64(n.Index*1000+k)))
			go func() {
				defer wg.Done()
				s.slot(ctx, n, fmt.Sprintf("web-%d-%d", n.Index, k), rng)
			}()
		}
	}
	wg.Wait()
}

// slot cycles one StatefulSet-style name on a node: ADD, a few CHECKs,
// then either DEL or a replacement whose ADD comes before the old
// sandbox's DEL (a late DEL).
func (s *soak) slot(ctx context.Context, n *cluster.Node, name string, rng *rand.Rand) {
	var cur *cluster.Pod
	for ctx.Err() == nil {
		sleep(ctx, time.Duration(100+rng.IntN(400))*time.Millisecond)
		if ctx.Err() != nil {
			break
		}
		if cur == nil {
			cur = s.addWithRetries(ctx, n, name)
			continue
		}
		switch r := rng.IntN(10); {
		case r < 5:
			s.op("CHECK")
			if err := s.c.CheckPod(ctx, cur); err != nil {
				s.op("CHECK_failed")
				s.log.Info("CHECK failed", "pod", name, "err", err)
			}
		case r < 7:
			s.delete(ctx, cur)
			cur = nil
		default:
			// The pod is recreated under its name on the same node; the
			// runtime's DEL of the old sandbox comes only after the new
			// sandbox's ADD.
			s.op("replace")
			next := s.addWithRetries(ctx, n, name)
			s.delete(ctx, cur)
			cur = next
		}
	}
	if cur != nil {
		s.delete(context.WithoutCancel(ctx), cur)
	}
}

// addWithRetries makes a sandbox and runs ADD until one succeeds or ctx
// ends; a failed sandbox is torn down (DEL, namespace removed) and a new
// one made, as kubelet does. It returns the pod, or nil.
func (s *soak) addWithRetries(ctx context.Context, n *cluster.Node, name string) *cluster.Pod {
	for ctx.Err() == nil {
		p, err := s.c.NewPod(n, name)
		if err != nil {
			s.log.Error("new sandbox", "pod", name, "err", err)
			sleep(ctx, time.Second)
			continue
		}
		s.op("ADD")
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), addBound)
		started := time.Now()
		err = s.c.AddPod(actx, p)
		cancel()
		if err == nil {
			s.mu.Lock()
			s.live[p] = true
			s.mu.Unlock()
			s.faults.addSucceeded(n, time.Now())
			return p
		}
		var te *types.Error
		if !errors.As(err, &te) {
			s.violate(InvAddAnswers, "ADD of %s on %s after %v: %v", name, n.Name, time.Since(started).Round(time.Millisecond), err)
		}
		s.op("ADD_failed")
		s.log.Info("ADD failed; new sandbox", "pod", name, "node", n.Name, "err", err)
		s.delete(ctx, p)
		sleep(ctx, 500*time.Millisecond)
	}
	return nil
}

// delete runs DEL until it succeeds (a DEL the agent cannot take now is
// queued by the plugin and answered 0), bounded; the namespace goes with
// the last try.
func (s *soak) delete(ctx context.Context, p *cluster.Pod) {
	s.mu.Lock()
	delete(s.live, p)
	s.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	for try := 0; ; try++ {
		s.op("DEL")
		dctx, cancel := context.WithTimeout(ctx, addBound)
		err := s.c.DeletePod(dctx, p)
		cancel()
		if err == nil {
			return
		}
		s.op("DEL_failed")
		s.log.Info("DEL failed", "pod", p.Name, "err", err)
		if try == 20 {
			s.violate(InvAddAnswers, "DEL of %s on %s failed %d times: %v", p.Name, p.Node.Name, try+1, err)
			_ = s.c.DropPod(p)
			return
		}
		sleep(ctx, time.Second)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// livePods returns the pods the driver holds now.
func (s *soak) livePods() []*cluster.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*cluster.Pod, 0, len(s.live))
	for p := range s.live {
		out = append(out, p)
	}
	return out
}
