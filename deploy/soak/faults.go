package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/simclock"
	"github.com/allotnet/allot/deploy/cluster"
)

// The kinds of fault the schedule injects.
const (
	FaultAgentKill    = "agent_kill9"
	FaultLeaderKill   = "broker_leader_kill9"
	FaultLeaderStop   = "broker_leader_sigstop"
	FaultMemberKill   = "etcd_member_kill"
	FaultNodeTerm     = "node_terminated"
	FaultEC2Errors    = "ec2_errors"
	FaultEC2Latency   = "ec2_latency"
	FaultConsistency  = "ec2_eventual_consistency"
	FaultOtherTenants = "ec2_other_tenants"
	FaultPartition    = "agent_broker_partition"
	FaultIMDSOutage   = "imds_outage"
)

// roundRobin are the faults injected one after another, in this order;
// node terminations run beside them (faultSchedule.nodes).
var roundRobin = []string{FaultAgentKill, FaultEC2Errors, FaultLeaderStop, FaultPartition, FaultOtherTenants,
	FaultLeaderKill, FaultIMDSOutage, FaultEC2Latency, FaultMemberKill, FaultConsistency}

// FaultKinds lists every kind.
var FaultKinds = append(slices.Clone(roundRobin), FaultNodeTerm)

// recoverBound is how long the schedule waits for the cluster to recover
// from a fault before it counts it unrecovered.
const recoverBound = 60 * time.Second

// faultActions are the actions an EC2 fault picks from: the ENI and address calls and the Describe the broker reconciles with.
var faultActions = []string{"CreateNetworkInterface", "AttachNetworkInterface", "AssignPrivateIpAddresses",
	"UnassignPrivateIpAddresses", "DetachNetworkInterface", "DeleteNetworkInterface", "DescribeNetworkInterfaces"}

type faultSchedule struct {
	s *soak
	// rng drives the faults injected one after another, nodeRng the node
	// terminations beside them: each is used by one goroutine only.
	rng, nodeRng *rand.Rand

	// agents is held while a fault picks a node and while it stops or
	// starts an agent or cuts a node off, and while a termination picks
	// its node and retires it: a node picked by one is never picked by the
	// other.
	agents sync.Mutex

	mu       sync.Mutex
	paused   *cluster.Broker
	draining chan struct{}
	cut      *cluster.Node // partitioned from the brokers
	noIMDS   *cluster.Node // its IMDS down
	lastAdd  map[*cluster.Node]time.Time
	// judged is the node of the fault under way, from its pick until its
	// recovery is recorded (judge), nil when the fault hit no node. A
	// termination leaves it alone: the recovery is the first ADD on that
	// node after the fault was lifted, which a node the soak terminated
	// meanwhile never shows.
	judged *cluster.Node
	// judgedDone is closed when judged is cleared.
	judgedDone chan struct{}
}

func newFaultSchedule(s *soak) *faultSchedule {
	return &faultSchedule{s: s, rng: rand.New(rand.NewPCG(uint64(s.cfg.Seed), 0xfa17)),
		nodeRng: rand.New(rand.NewPCG(uint64(s.cfg.Seed), 0x7e5)), lastAdd: map[*cluster.Node]time.Time{}}
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
		kind := roundRobin[i%len(roundRobin)]
		f.s.log.Info("fault", "kind", kind)
		var scope *cluster.Node
		lifted, detail, err := f.inject(ctx, kind, &scope)
		ready := time.Now()
		f.count(kind)
		if err != nil {
			f.unjudge(scope)
			f.s.brokeRun(fmt.Errorf("fault %s: %w", kind, err))
			return
		}
		if !f.judge(ctx, kind, detail, lifted, ready, scope) {
			return // the run ended before a pod could show recovery
		}
	}
}

// judge waits for the recovery of a fault lifted at lifted whose process
// served again at ready, on scope if it hit a node, and records it; then
// scope may be terminated. It reports false, recording nothing, when ctx
// ended first.
func (f *faultSchedule) judge(ctx context.Context, kind, detail string, lifted, ready time.Time, scope *cluster.Node) bool {
	defer f.unjudge(scope)
	rec, ok := f.recovery(ctx, lifted, ready, scope)
	if !ok && ctx.Err() != nil {
		return false
	}
	f.record(Recovery{Kind: kind, Detail: detail, Seconds: rec.Seconds(), Recovered: ok})
	return true
}

// pickJudged is pickNode for a fault that hits a node: the node is the
// fault's (judged) until judge recorded its recovery. Called with
// f.agents held.
func (f *faultSchedule) pickJudged() *cluster.Node {
	f.mu.Lock()
	judged := f.judged // nil: one fault at a time
	f.mu.Unlock()
	n := f.pickNode(f.rng, judged)
	if n != nil {
		f.mu.Lock()
		f.judged, f.judgedDone = n, make(chan struct{})
		f.mu.Unlock()
	}
	return n
}

// unjudge ends n's time as the fault's node (nil: the fault hit none).
func (f *faultSchedule) unjudge(n *cluster.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n != nil && f.judged == n {
		close(f.judgedDone)
		f.judged, f.judgedDone = nil, nil
	}
}

func (f *faultSchedule) count(kind string) {
	f.s.mu.Lock()
	f.s.res.Faults[kind]++
	f.s.mu.Unlock()
}

func (f *faultSchedule) record(r Recovery) {
	f.s.mu.Lock()
	f.s.res.Recoveries = append(f.s.res.Recoveries, r)
	f.s.mu.Unlock()
}

// inject applies one fault and lifts it; it returns when the process
// hit is back (serving, or a leader elected) and the moment the fault was
// lifted (the process restarted or resumed, EC2 set right). An agent
// fault sets *scope to its node. Restores run even when ctx ends
// meanwhile.
func (f *faultSchedule) inject(ctx context.Context, kind string, scope **cluster.Node) (time.Time, string, error) {
	bg := context.WithoutCancel(ctx)
	wctx, cancel := context.WithTimeout(bg, recoverBound)
	defer cancel()
	switch kind {
	case FaultAgentKill:
		f.agents.Lock()
		defer f.agents.Unlock()
		n := f.pickJudged()
		if n == nil {
			return time.Now(), "no node", nil
		}
		*scope = n
		if err := n.Agent.Kill(); err != nil {
			return time.Time{}, "", err
		}
		sleep(bg, time.Duration(200+f.rng.IntN(1500))*time.Millisecond)
		lifted := time.Now()
		if err := n.Agent.Start(); err != nil {
			return time.Time{}, "", err
		}
		return lifted, n.Name, n.Agent.WaitReady(wctx)
	case FaultLeaderKill, FaultLeaderStop, FaultMemberKill:
		return f.brokerFault(wctx, kind)
	case FaultPartition, FaultIMDSOutage:
		f.agents.Lock() // the node is not terminated meanwhile
		defer f.agents.Unlock()
		return f.nodeFault(bg, kind, scope)
	case FaultEC2Errors, FaultEC2Latency:
		action := faultActions[f.rng.IntN(len(faultActions))]
		fault := awssim.Fault{ErrorRate: 0.3 + 0.4*f.rng.Float64(), ErrorCode: "InternalError"}
		if kind == FaultEC2Latency {
			fault = awssim.Fault{Latency: simclock.Duration(time.Duration(5+f.rng.IntN(20)) * time.Second)}
		}
		f.s.c.Sim.SetFaults(map[string]awssim.Fault{action: fault})
		sleep(bg, f.s.cfg.FaultWindow)
		f.s.c.Sim.SetFaults(nil)
		return time.Now(), fmt.Sprintf("%s rate=%.2f latency=%v (simulated)", action, fault.ErrorRate, time.Duration(fault.Latency)), nil
	case FaultConsistency:
		// DescribeNetworkInterfaces leaves out ENIs created within the
		// window, as EC2's eventually consistent reads do.
		w := time.Duration(5+f.rng.IntN(26)) * time.Second
		f.s.c.Sim.World().SetConsistencyWindow(w)
		sleep(bg, f.s.cfg.FaultWindow)
		f.s.c.Sim.World().SetConsistencyWindow(0)
		return time.Now(), fmt.Sprintf("new ENIs hidden from Describe for %v (simulated)", w), nil
	case FaultOtherTenants:
		f.drain()
		sleep(bg, f.s.cfg.FaultWindow)
		f.lift()
		return time.Now(), "every bucket emptied for " + f.s.cfg.FaultWindow.String(), nil
	}
	return time.Time{}, "", fmt.Errorf("unknown fault %q", kind)
}

// pickNode is a random node of the driver's (drawn with rng) that is
// neither being terminated nor judged, the node of a fault whose recovery
// is still to be judged. Called with f.agents held.
func (f *faultSchedule) pickNode(rng *rand.Rand, judged *cluster.Node) *cluster.Node {
	var ns []*cluster.Node
	for _, n := range f.s.c.LiveNodes() {
		if n != judged && !f.s.retired(n) {
			ns = append(ns, n)
		}
	}
	if len(ns) == 0 {
		return nil
	}
	return ns[rng.IntN(len(ns))]
}

// brokerFault hits the leader (kill -9, restarted on its data after
// 0.5 s; or SIGSTOP for longer than the election TTL, so a standby takes
// over while it is frozen), or kills another replica with its etcd member
// for a while (two of three keep the quorum). It returns when a leader
// serves and the replica hit answers again.
func (f *faultSchedule) brokerFault(ctx context.Context, kind string) (time.Time, string, error) {
	c := f.s.c
	lead, err := c.WaitLeader(ctx)
	if err != nil {
		return time.Time{}, "", err
	}
	hit := lead
	switch kind {
	case FaultLeaderStop:
		frozen := time.Duration(4000+f.rng.IntN(2000)) * time.Millisecond
		f.mu.Lock()
		f.paused = lead
		f.mu.Unlock()
		if err := lead.Pause(); err != nil {
			return time.Time{}, "", err
		}
		sleep(ctx, frozen)
		lifted := time.Now()
		f.lift()
		return lifted, fmt.Sprintf("%s (leader) frozen %v", lead.Name, frozen.Round(time.Millisecond)), f.waitBack(ctx, lead)
	case FaultMemberKill:
		for _, b := range c.Brokers {
			if b != lead && b.Running() {
				hit = b
				break
			}
		}
	}
	down := 500 * time.Millisecond
	if kind == FaultMemberKill {
		down = time.Duration(3000+f.rng.IntN(4000)) * time.Millisecond
	}
	if err := hit.Kill(); err != nil {
		return time.Time{}, "", err
	}
	sleep(ctx, down)
	lifted := time.Now()
	if err := hit.Launch(); err != nil {
		return time.Time{}, "", err
	}
	what := "leader"
	if hit != lead {
		what = "follower; leader " + lead.Name
	}
	return lifted, fmt.Sprintf("%s (%s) down %v", hit.Name, what, down.Round(time.Millisecond)), f.waitBack(ctx, hit)
}

// waitBack waits until a leader serves and b answers naming it.
func (f *faultSchedule) waitBack(ctx context.Context, b *cluster.Broker) error {
	if _, err := f.s.c.WaitLeader(ctx); err != nil {
		return err
	}
	return b.WaitLeader(ctx)
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
	if f.paused != nil {
		_ = f.paused.Resume()
		f.paused = nil
	}
	if f.draining != nil {
		close(f.draining)
		f.draining = nil
	}
	if f.cut != nil {
		_ = f.cut.Partition(false)
		f.cut = nil
	}
	if f.noIMDS != nil {
		_ = f.s.c.Sim.SetIMDSDown(f.noIMDS.InstanceID, false)
		f.noIMDS = nil
	}
	f.s.c.Sim.SetFaults(nil)
	f.s.c.Sim.World().SetConsistencyWindow(0)
}

// nodeFault cuts a random node off from every broker (its agent keeps
// serving its pods from what it holds; the brokers hear nothing from it),
// or takes its IMDS down (the agent can set up no new ENI and confirm
// nothing through IMDS), for the partition or the fault window, then lifts
// it. The node is
// the fault's scope: it has recovered when a pod ADD succeeds on it.
func (f *faultSchedule) nodeFault(ctx context.Context, kind string, scope **cluster.Node) (time.Time, string, error) {
	n := f.pickJudged()
	if n == nil {
		return time.Now(), "no node", nil
	}
	*scope = n
	f.mu.Lock()
	var err error
	if kind == FaultPartition {
		f.cut, err = n, n.Partition(true)
	} else {
		f.noIMDS, err = n, f.s.c.Sim.SetIMDSDown(n.InstanceID, true)
	}
	f.mu.Unlock()
	if err != nil {
		f.lift()
		return time.Time{}, "", err
	}
	what, window := "cut off from every broker", f.s.cfg.PartitionWindow
	if kind == FaultIMDSOutage {
		what, window = "IMDS down", f.s.cfg.FaultWindow
	}
	sleep(ctx, window)
	lifted := time.Now()
	f.lift()
	return lifted, fmt.Sprintf("%s %s for %v", n.Name, what, window), nil
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
