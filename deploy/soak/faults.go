package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/simclock"
	"github.com/allotnet/allot/deploy/cluster"
)

// The kinds of fault the schedule injects.
const (
	FaultAgentKill   = "agent_kill9"
	FaultBrokerKill  = "broker_kill9"
	FaultBrokerStop  = "broker_sigstop"
	FaultEC2Errors   = "ec2_errors"
	FaultEC2Latency  = "ec2_latency"
	FaultOtherTenant = "ec2_other_tenants"
)

// FaultKinds lists them in the order the schedule first injects them.
var FaultKinds = []string{FaultAgentKill, FaultEC2Errors, FaultBrokerStop, FaultOtherTenant, FaultBrokerKill, FaultEC2Latency}

// faultWindow is how long a lasting fault (a frozen broker, EC2 errors
// or latency, drained buckets) lasts.
const faultWindow = 3 * time.Second

// recoverBound is how long the schedule waits for the cluster to recover
// from a fault before it counts it unrecovered.
const recoverBound = 60 * time.Second

// faultActions are the actions an EC2 fault picks from: the ENI and address calls and the Describe the broker reconciles with.
var faultActions = []string{"CreateNetworkInterface", "AttachNetworkInterface", "AssignPrivateIpAddresses",
	"UnassignPrivateIpAddresses", "DetachNetworkInterface", "DeleteNetworkInterface", "DescribeNetworkInterfaces"}

type faultSchedule struct {
	s   *soak
	rng *rand.Rand

	mu       sync.Mutex
	paused   bool
	draining chan struct{}
	lastAdd  map[*cluster.Node]time.Time
}

func newFaultSchedule(s *soak) *faultSchedule {
	return &faultSchedule{s: s, rng: rand.New(rand.NewPCG(uint64(s.cfg.Seed), 0xfa17)), lastAdd: map[*cluster.Node]time.Time{}}
}

func (f *faultSchedule) addSucceeded(n *cluster.Node, at time.Time) {
	f.mu.Lock()
	f.lastAdd[n] = at
	f.mu.Unlock()
}

// run injects one fault after another, each after a pause, until ctx ends.
func (f *faultSchedule) run(ctx context.Context) {
	for i := 0; ; i++ {
		sleep(ctx, f.s.cfg.FaultEvery)
		if ctx.Err() != nil {
			return
		}
		kind := FaultKinds[i%len(FaultKinds)]
		n := f.s.c.Nodes[f.rng.IntN(len(f.s.c.Nodes))]
		f.s.log.Info("fault", "kind", kind, "node", n.Name)
		lifted, detail, err := f.inject(ctx, kind, n)
		ready := time.Now()
		f.s.mu.Lock()
		f.s.res.Faults[kind]++
		f.s.mu.Unlock()
		if err != nil {
			f.s.brokeRun(fmt.Errorf("fault %s: %w", kind, err))
			return
		}
		scope := n
		if kind != FaultAgentKill {
			scope = nil
		}
		rec, ok := f.recovery(ctx, lifted, ready, scope)
		if !ok && ctx.Err() != nil {
			return // the run ended before a pod could show recovery
		}
		f.s.mu.Lock()
		f.s.res.Recoveries = append(f.s.res.Recoveries, Recovery{Kind: kind, Detail: detail, Seconds: rec.Seconds(), Recovered: ok})
		f.s.mu.Unlock()
	}
}

// inject applies one fault and lifts it; it returns when the process
// hit is back (serving, or leading) and the moment the fault was lifted
// (the process restarted or resumed, EC2 set right). Restores run even
// when ctx ends meanwhile.
func (f *faultSchedule) inject(ctx context.Context, kind string, n *cluster.Node) (time.Time, string, error) {
	c := f.s.c
	bg := context.WithoutCancel(ctx)
	switch kind {
	case FaultAgentKill:
		if err := n.Agent.Kill(); err != nil {
			return time.Time{}, "", err
		}
		sleep(bg, time.Duration(200+f.rng.IntN(1500))*time.Millisecond)
		lifted := time.Now()
		if err := n.Agent.Start(); err != nil {
			return time.Time{}, "", err
		}
		wctx, cancel := context.WithTimeout(bg, recoverBound)
		defer cancel()
		return lifted, n.Name, n.Agent.WaitReady(wctx)
	case FaultBrokerKill:
		if err := c.Broker.Kill(); err != nil {
			return time.Time{}, "", err
		}
		sleep(bg, 500*time.Millisecond)
		lifted := time.Now()
		wctx, cancel := context.WithTimeout(bg, recoverBound)
		defer cancel()
		return lifted, "broker-1", c.Broker.Start(wctx)
	case FaultBrokerStop:
		f.mu.Lock()
		f.paused = true
		f.mu.Unlock()
		if err := c.Broker.Pause(); err != nil {
			return time.Time{}, "", err
		}
		sleep(bg, faultWindow)
		lifted := time.Now()
		f.lift()
		wctx, cancel := context.WithTimeout(bg, recoverBound)
		defer cancel()
		return lifted, fmt.Sprintf("broker-1 frozen %v", faultWindow), c.Broker.WaitLeader(wctx)
	case FaultEC2Errors, FaultEC2Latency:
		action := faultActions[f.rng.IntN(len(faultActions))]
		fault := awssim.Fault{ErrorRate: 0.3 + 0.4*f.rng.Float64(), ErrorCode: "InternalError"}
		if kind == FaultEC2Latency {
			fault = awssim.Fault{Latency: simclock.Duration(time.Duration(5+f.rng.IntN(20)) * time.Second)}
		}
		c.Sim.SetFaults(map[string]awssim.Fault{action: fault})
		sleep(bg, faultWindow)
		c.Sim.SetFaults(nil)
		return time.Now(), fmt.Sprintf("%s rate=%.2f latency=%v (simulated)", action, fault.ErrorRate, time.Duration(fault.Latency)), nil
	case FaultOtherTenant:
		f.drain()
		sleep(bg, faultWindow)
		f.lift()
		return time.Now(), "every bucket emptied for " + faultWindow.String(), nil
	}
	return time.Time{}, "", fmt.Errorf("unknown fault %q", kind)
}

// drain empties every EC2 token bucket every 20 ms, as other tenants of
// the account spending its rate would, until lift.
func (f *faultSchedule) drain() {
	stop := make(chan struct{})
	f.mu.Lock()
	f.draining = stop
	f.mu.Unlock()
	lim := f.s.c.Sim.Throttle()
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			for name := range lim.Specs() {
				for i := 0; i < 1000 && lim.Take(name); i++ {
				}
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
}

// lift ends every lasting fault: the broker runs again, the buckets are
// left alone, EC2 answers normally. Safe to call at any time.
func (f *faultSchedule) lift() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.paused {
		_ = f.s.c.Broker.Resume()
		f.paused = false
	}
	if f.draining != nil {
		close(f.draining)
		f.draining = nil
	}
	f.s.c.Sim.SetFaults(nil)
}

// recovery is the time from lifted until the process hit serves again
// (ready) and a pod ADD succeeded after that (on the node, when the fault
// hit one).
func (f *faultSchedule) recovery(ctx context.Context, lifted, ready time.Time, n *cluster.Node) (time.Duration, bool) {
	deadline := lifted.Add(recoverBound)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		f.mu.Lock()
		var at time.Time
		for node, t := range f.lastAdd {
			if (n == nil || node == n) && t.After(ready) && (at.IsZero() || t.Before(at)) {
				at = t
			}
		}
		f.mu.Unlock()
		if !at.IsZero() {
			return at.Sub(lifted), true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return recoverBound, false
}
