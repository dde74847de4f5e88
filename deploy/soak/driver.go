package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/allotnet/allot/cni/plugin"
	"github.com/allotnet/allot/deploy/cluster"
)

// addBound is the longest one ADD may take before the runtime gives up on
// it: kubelet's runtime request timeout, which the plugin's ADD timeout
// (and the agent's wait for capacity within it) stays under. An ADD that
// neither succeeds nor answers a CNI error within it breaks the
// "every ADD answers" invariant.
const addBound = plugin.RuntimeRequestTimeout

// drive starts the driver of every node; it runs until the run's context
// ends (nodesWG says when). Nodes that join meanwhile (replacing a
// terminated one) get theirs from startNode.
func (s *soak) drive() {
	for _, n := range s.c.LiveNodes() {
		s.startNode(n)
	}
}

// startNode runs a kubelet-like loop per pod slot on n, and its CNI GC
// calls, until the run ends or the node is retired. It reports false,
// starting nothing, once the run has ended.
func (s *soak) startNode(n *cluster.Node) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runCtx.Err() != nil {
		return false
	}
	ctx, cancel := context.WithCancel(s.runCtx)
	ops, cancelOps := context.WithCancel(context.Background())
	d := &nodeDriver{cancel: cancel, ops: ops, cancelOps: cancelOps}
	s.drivers[n] = d
	for k := range s.cfg.SlotsPerNode {
		d.wg.Add(1)
		s.nodesWG.Add(1)
		rng := rand.New(rand.NewPCG(uint64(s.cfg.Seed), uint64(n.Index*1000+k)))
		go func() {
			defer s.nodesWG.Done()
			defer d.wg.Done()
			s.slot(ctx, n, d, fmt.Sprintf("web-%d-%d", n.Index, k), rng)
		}()
	}
	d.wg.Add(1)
	s.nodesWG.Add(1)
	go func() {
		defer s.nodesWG.Done()
		defer d.wg.Done()
		s.gcLoop(ctx, n, d)
	}()
	return true
}

// nodeDriver is one node's share of the driver.
type nodeDriver struct {
	cancel context.CancelFunc
	// ops bounds the CNI calls: they outlive the run's end (a pod's ADD
	// or DEL is seen through) but not the node's termination.
	ops       context.Context
	cancelOps context.CancelFunc
	wg        sync.WaitGroup
	// gate lets ADDs run side by side (read-locked) but not beside a GC
	// call (locked): a runtime never lists its valid attachments while an
	// ADD it has not counted is under way.
	gate sync.RWMutex
	// retired is set when the node is being terminated: its slots leave
	// their pods to the termination instead of deleting them.
	retired bool
}

// retired says whether n is being (or was) terminated.
func (s *soak) retired(n *cluster.Node) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.drivers[n]
	return d != nil && d.retired
}

// gcLoop calls CNI GC on the node every GCEvery with the pods the driver
// holds there as the valid attachments, as a runtime does after it
// reconciles its sandboxes.
func (s *soak) gcLoop(ctx context.Context, n *cluster.Node, d *nodeDriver) {
	for ctx.Err() == nil {
		sleep(ctx, s.cfg.GCEvery)
		if ctx.Err() != nil {
			return
		}
		d.gate.Lock()
		var valid []*cluster.Pod
		for _, p := range s.livePods() {
			if p.Node == n {
				valid = append(valid, p)
			}
		}
		s.op("GC")
		gctx, cancel := context.WithTimeout(d.ops, addBound)
		err := s.c.GC(gctx, n, valid)
		cancel()
		d.gate.Unlock()
		if err != nil {
			s.op("GC_failed")
			s.log.Info("GC failed", "node", n.Name, "err", err)
		}
	}
}

// slot cycles one StatefulSet-style name on a node: ADD, a few CHECKs,
// then either DEL or a replacement whose ADD comes before the old
// sandbox's DEL (a late DEL).
func (s *soak) slot(ctx context.Context, n *cluster.Node, d *nodeDriver, name string, rng *rand.Rand) {
	var cur *cluster.Pod
	for ctx.Err() == nil {
		sleep(ctx, time.Duration(100+rng.IntN(400))*time.Millisecond)
		if ctx.Err() != nil {
			break
		}
		if cur == nil {
			cur = s.addWithRetries(ctx, n, d, name)
			continue
		}
		switch r := rng.IntN(10); {
		case r < 5:
			s.op("CHECK")
			if err := s.c.CheckPod(ctx, cur); err != nil {
				s.op("CHECK_failed")
				s.log.Info("CHECK failed", "pod", name, "err", err)
				var te *types.Error
				if ctx.Err() == nil && !s.retired(n) && (!errors.As(err, &te) || te.Code != types.ErrTryAgainLater) {
					s.violate(InvCNICheck, "CHECK of %s on %s: %v", name, n.Name, err)
				}
			}
		case r < 7:
			s.delete(ctx, cur)
			cur = nil
		default:
			// The pod is recreated under its name on the same node; the
			// runtime's DEL of the old sandbox comes only after the new
			// sandbox's ADD.
			s.op("replace")
			next := s.addWithRetries(ctx, n, d, name)
			s.delete(ctx, cur)
			cur = next
		}
	}
	if cur != nil && !s.retired(n) {
		s.delete(context.WithoutCancel(ctx), cur)
	}
}

// addWithRetries makes a sandbox and runs ADD until one succeeds or ctx
// ends; a failed sandbox is torn down (DEL, namespace removed) and a new
// one made, as kubelet does. It returns the pod, or nil.
func (s *soak) addWithRetries(ctx context.Context, n *cluster.Node, d *nodeDriver, name string) *cluster.Pod {
	for ctx.Err() == nil {
		p, err := s.c.NewPod(n, name)
		if err != nil {
			s.log.Error("new sandbox", "pod", name, "err", err)
			sleep(ctx, time.Second)
			continue
		}
		s.op("ADD")
		actx, cancel := context.WithTimeout(d.ops, addBound)
		started := time.Now()
		d.gate.RLock()
		err = s.c.AddPod(actx, p)
		if err == nil {
			s.mu.Lock()
			s.live[p] = true
			s.mu.Unlock()
		}
		d.gate.RUnlock()
		cancel()
		if err == nil {
			s.faults.addSucceeded(n, time.Now())
			return p
		}
		if s.retired(n) {
			// The node is going away with everything on it; its agent
			// was killed under this ADD.
			_ = s.c.DropPod(p)
			return nil
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
	ctx = context.WithoutCancel(ctx)
	if d := s.drivers[p.Node]; d != nil {
		ctx = d.ops
	}
	s.mu.Unlock()
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
		if s.retired(p.Node) {
			_ = s.c.DropPod(p) // nothing runs there any more
			return
		}
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
