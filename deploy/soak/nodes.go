package soak

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/deploy/cluster"
)

// cleanupBound is how long the broker may take to release a terminated
// node: its node TTL, then reconciler passes that see EC2 report the
// instance gone.
const cleanupBound = 2 * time.Minute

// nodes terminates a node every NodeEvery, beside the other faults, until
// ctx ends: the node's agent dies with its instance, awssim terminates the
// instance (its ENIs detached, its namespace gone), the broker must
// release everything it recorded for it and delete its ENIs, and a new
// instance replaces it as an autoscaling group would. A termination under
// way when the run ends is finished, so the end checks see a whole
// cluster.
func (f *faultSchedule) nodes(ctx context.Context) {
	for ctx.Err() == nil {
		sleep(ctx, f.s.cfg.NodeEvery)
		if ctx.Err() != nil {
			return
		}
		f.s.log.Info("fault", "kind", FaultNodeTerm)
		rec, err := f.terminate(context.WithoutCancel(ctx))
		f.count(FaultNodeTerm)
		if err != nil {
			f.s.brokeRun(fmt.Errorf("fault %s: %w", FaultNodeTerm, err))
			return
		}
		f.record(rec)
	}
}

// terminate retires one node and replaces it. Its recovery is the time
// from the termination until the broker holds no record and EC2 no ENI of
// the instance; the detail says how long the replacement took to serve
// its first pod.
func (f *faultSchedule) terminate(ctx context.Context) (Recovery, error) {
	n, err := f.victim(ctx)
	if err != nil {
		return Recovery{}, err
	}
	// Retired, n is picked by no fault from here: its agent is ours to
	// kill.
	if err := n.Agent.Kill(); err != nil {
		return Recovery{}, err
	}
	killed := time.Now()
	f.s.waitDriver(n)
	f.s.log.Info("node's driver stopped", "node", n.Name, "took", time.Since(killed).Round(time.Millisecond))
	if err := f.s.c.TerminateInstance(n); err != nil {
		return Recovery{}, err
	}
	terminated := time.Now()
	cctx, cancel := context.WithTimeout(ctx, cleanupBound)
	defer cancel()
	cleanErr := f.waitReleased(cctx, n)
	cleaned := time.Since(terminated)
	if cleanErr != nil {
		f.s.violate(InvIdle, "%s (%s) terminated %v ago: %v", n.Name, n.InstanceID, cleanupBound, cleanErr)
	}
	actx, cancel2 := context.WithTimeout(ctx, recoverBound)
	defer cancel2()
	joined := time.Now()
	m, err := f.s.c.AddNode(actx, n)
	if err != nil {
		return Recovery{}, fmt.Errorf("replace %s: %w", n.Name, err)
	}
	f.s.log.Info("node replaced", "node", n.Name, "by", m.Name, "took", time.Since(joined).Round(time.Millisecond))
	if !f.s.startNode(m) {
		return Recovery{Kind: FaultNodeTerm, Detail: fmt.Sprintf("%s (%s) released in %.1fs; run ended before %s served",
			n.Name, n.InstanceID, cleaned.Seconds(), m.Name), Seconds: cleaned.Seconds(), Recovered: cleanErr == nil}, nil
	}
	first, ok := f.recovery(ctx, joined, joined, m)
	detail := fmt.Sprintf("%s (%s) released in %.1fs; %s's first pod %.1fs after launch", n.Name, n.InstanceID,
		cleaned.Seconds(), m.Name, first.Seconds())
	return Recovery{Kind: FaultNodeTerm, Detail: detail, Seconds: cleaned.Seconds(), Recovered: cleanErr == nil && ok}, nil
}

// victim picks the node to terminate, at random among those neither
// retired nor the node of a fault whose recovery is still to be judged,
// and retires it (its driver stops). When the judged node is the only one
// left it waits for the judgement: a fault's recovery is judged on its
// node to the end, so a node the soak terminated is never counted as one
// that did not recover.
func (f *faultSchedule) victim(ctx context.Context) (*cluster.Node, error) {
	for logged := false; ; logged = true {
		f.agents.Lock()
		f.mu.Lock()
		judged, done := f.judged, f.judgedDone
		f.mu.Unlock()
		n := f.pickNode(f.nodeRng, judged)
		if n != nil {
			f.s.retire(n)
			f.agents.Unlock()
			return n, nil
		}
		f.agents.Unlock()
		if judged == nil {
			return nil, errors.New("no node to terminate")
		}
		if !logged {
			f.s.log.Info("termination waits for a fault's recovery to be judged", "node", judged.Name)
		}
		select {
		case <-done:
		case <-ctx.Done():
			return nil, fmt.Errorf("no node to terminate: %s, the only one, is still a fault's (%w)", judged.Name, ctx.Err())
		}
	}
}

// waitReleased waits until the broker neither registers the instance nor
// records an ENI of it, and EC2 holds no ENI tagged with it.
func (f *faultSchedule) waitReleased(ctx context.Context, n *cluster.Node) error {
	var last error
	for {
		last = f.released(ctx, n)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (f *faultSchedule) released(ctx context.Context, n *cluster.Node) error {
	c := f.s.c
	// A replica may be frozen by the other faults: ask again rather than
	// wait for it.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	recs, _, err := c.BrokerFootprint(ctx)
	if err != nil {
		return err
	}
	if fp := recs[n.InstanceID]; len(fp.ENIs) > 0 {
		return fmt.Errorf("the broker still records %d ENIs of it", len(fp.ENIs))
	}
	nodes, err := c.BrokerNodes(ctx)
	if err != nil {
		return err
	}
	if _, ok := nodes[n.InstanceID]; ok {
		return errors.New("the broker still registers it")
	}
	for _, e := range c.OurENIs() {
		if e.Tags[ec2client.TagInstanceID] == n.InstanceID {
			return fmt.Errorf("EC2 still has its ENI %s (%s)", e.ID, e.Status)
		}
	}
	return nil
}

// retire marks n's driver as going away and stops it: its slots leave
// their pods to the termination.
func (s *soak) retire(n *cluster.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.drivers[n]; d != nil {
		d.retired = true
		d.cancel()
		d.cancelOps()
	}
	for p := range s.live {
		if p.Node == n {
			delete(s.live, p)
		}
	}
}

// waitDriver waits until n's driver goroutines have returned, then
// forgets the pods they added meanwhile.
func (s *soak) waitDriver(n *cluster.Node) {
	s.mu.Lock()
	d := s.drivers[n]
	s.mu.Unlock()
	if d != nil {
		d.wg.Wait()
	}
	s.mu.Lock()
	for p := range s.live {
		if p.Node == n {
			delete(s.live, p)
		}
	}
	s.mu.Unlock()
}
