// Package soak runs the one-machine cluster of deploy/cluster for a
// while with everything failing at once and checks that nothing is lost.
// A kubelet-like driver creates, checks and deletes pods through the CNI
// plugin (retrying failed sandboxes, reusing StatefulSet-style names with
// the old sandbox's DEL arriving after the new one's ADD); a fault
// schedule kills and freezes the agents and the broker, makes EC2 fail and
// slow down, and drains EC2's token buckets as other tenants would; an
// invariant checker compares the agents' records, the nodes' devices, the
// broker's records and awssim's state the whole time and at the end.
package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/allotnet/allot/deploy/cluster"
)

// Config is one soak run.
type Config struct {
	Cluster cluster.Config
	// Duration is how long the driver and the faults run; the end checks
	// come after it.
	Duration time.Duration
	// EveryFault makes the run go on past Duration, up to three times as
	// long, until each kind of fault has been injected at least once: a
	// fault waits for the cluster to recover before the next, so on a
	// slow machine a run of fixed length gets through fewer of them.
	EveryFault bool
	// SlotsPerNode is how many pod names each node's driver cycles through
	// (at most that many pods per node, plus replacements in flight).
	SlotsPerNode int
	// FaultEvery is the pause between two faults.
	FaultEvery time.Duration
	// FaultWindow is how long a lasting fault (a frozen broker, EC2
	// errors, latency or eventual consistency, drained buckets) lasts.
	FaultWindow time.Duration
	// PartitionWindow is how long a node stays cut off from the brokers;
	// 0 means FaultWindow. Longer than the brokers' node TTL (5 s in
	// deploy/cluster), it also shows a node the broker counted dead coming
	// back.
	PartitionWindow time.Duration
	// NodeEvery is the pause between two node terminations, which run
	// beside the other faults (a node's termination, its cleanup by the
	// broker and its replacement take longer than the others).
	NodeEvery time.Duration
	// GCEvery is how often each node's driver calls CNI GC.
	GCEvery time.Duration
	// Seed drives the driver's and the fault schedule's choices.
	Seed int64
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
}

// Run starts the cluster, soaks it and tears it down, also on failure. The
// result is returned whenever the cluster started; err says the run broke
// (not that an invariant was violated: Result.Violations says that).
func Run(ctx context.Context, cfg Config, progress io.Writer) (res *Result, err error) {
	if cfg.Duration <= 0 {
		return nil, errors.New("duration must be positive")
	}
	if cfg.SlotsPerNode == 0 {
		cfg.SlotsPerNode = 6
	}
	if cfg.FaultEvery == 0 {
		cfg.FaultEvery = 3 * time.Second
	}
	if cfg.FaultWindow == 0 {
		cfg.FaultWindow = 3 * time.Second
	}
	if cfg.PartitionWindow == 0 {
		cfg.PartitionWindow = cfg.FaultWindow
	}
	if cfg.NodeEvery == 0 {
		cfg.NodeEvery = time.Minute
	}
	if cfg.GCEvery == 0 {
		cfg.GCEvery = 10 * time.Second
	}
	if cfg.Cluster.Brokers == 0 {
		cfg.Cluster.Brokers = 3
	}
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Cluster.Logger = cfg.Logger
	cfg.Cluster.Partitionable = true // the partition fault cuts nodes' links to the brokers
	if cfg.Cluster.Seed == 0 {
		cfg.Cluster.Seed = cfg.Seed
	}
	c, err := cluster.Start(ctx, cfg.Cluster)
	if err != nil {
		return nil, fmt.Errorf("start cluster: %w", err)
	}
	s := newSoak(c, cfg)
	defer func() {
		s.faults.lift() // a frozen broker or drained buckets must not outlive the run
		err = errors.Join(err, c.Close())
	}()
	fmt.Fprintf(progress, "soak: cluster %s up (%d nodes, %d brokers); running %v, seed %d\n",
		c.Prefix, len(c.Nodes), len(c.Brokers), cfg.Duration, cfg.Seed)
	started := time.Now()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.endRun(runCtx, cancel)
	s.runCtx = runCtx
	s.drive()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); s.faults.run(runCtx) }()
	go func() { defer wg.Done(); s.faults.nodes(runCtx) }()
	go func() { defer wg.Done(); s.watch(runCtx) }()
	wg.Wait()
	s.nodesWG.Wait()
	s.res.Ran = time.Since(started)
	s.faults.lift()
	if err := s.finish(ctx); err != nil {
		s.brokeRun(err)
		return s.result(), err
	}
	return s.result(), nil
}

// soak is one run's state.
type soak struct {
	c   *cluster.Cluster
	cfg Config
	log *slog.Logger

	faults *faultSchedule

	mu  sync.Mutex
	res Result
	// live are the pods whose ADD succeeded and whose DEL has not yet.
	live map[*cluster.Pod]bool
	// drivers are the nodes' drivers; runCtx is the run's context they
	// run under, nodesWG counts their goroutines.
	drivers map[*cluster.Node]*nodeDriver
	runCtx  context.Context
	nodesWG sync.WaitGroup
}

func newSoak(c *cluster.Cluster, cfg Config) *soak {
	s := &soak{c: c, cfg: cfg, log: cfg.Logger, live: map[*cluster.Pod]bool{}, drivers: map[*cluster.Node]*nodeDriver{}}
	s.res = Result{Ops: map[string]int{}, Faults: map[string]int{}, Violations: map[string]int{}, Seed: cfg.Seed}
	for _, inv := range Invariants {
		s.res.Violations[inv] = 0
	}
	s.faults = newFaultSchedule(s)
	return s
}

func (s *soak) op(verb string) {
	s.mu.Lock()
	s.res.Ops[verb]++
	s.mu.Unlock()
}

// violate records a broken invariant with what showed it.
func (s *soak) violate(inv, format string, a ...any) {
	d := fmt.Sprintf(format, a...)
	s.log.Error("invariant violated", "invariant", inv, "detail", d)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.res.Violations[inv]++
	if len(s.res.Details) < 50 {
		s.res.Details = append(s.res.Details, inv+": "+d)
	}
}

func (s *soak) result() *Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.res
	return &r
}

// brokeRun records that the run itself broke (a fault could not be
// injected or lifted); the result is then not a pass.
func (s *soak) brokeRun(err error) {
	s.log.Error("soak run broke", "err", err)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.res.Err == "" {
		s.res.Err = err.Error()
	}
}

// endRun ends the run (cancel) after Duration or, with EveryFault, once
// every kind of fault was injected too, and at the latest after three
// times Duration.
func (s *soak) endRun(ctx context.Context, cancel context.CancelFunc) {
	defer cancel()
	sleep(ctx, s.cfg.Duration)
	if !s.cfg.EveryFault {
		return
	}
	deadline := time.Now().Add(2 * s.cfg.Duration)
	for ctx.Err() == nil && time.Now().Before(deadline) && !s.everyFaultSeen() {
		sleep(ctx, 100*time.Millisecond)
	}
}

// everyFaultSeen says whether each kind of fault was injected at least once.
func (s *soak) everyFaultSeen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range FaultKinds {
		if s.res.Faults[k] == 0 {
			return false
		}
	}
	return true
}
