// Package executor is the engine that runs on the leader broker and carries
// out the planner's plans against EC2. Before every mutating EC2 call it
// writes an intent to etcd (reserving subnet budget in the same transaction);
// after the call it records the result. When it starts it first resolves the
// intents a previous leader left open, by describing EC2, so a crash between
// two calls leaves neither an orphan ENI nor a double allocation.
package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/allotnet/allot/broker/clock"
	"github.com/allotnet/allot/broker/instances"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
)

// Config is everything the engine needs; main builds it. Its timers are in
// Clock's time.
type Config struct {
	// Cluster is the cluster name written into every ENI's tags.
	Cluster string
	Store   Store
	EC2     EC2
	Logger  *slog.Logger
	// Interval is how often the engine looks at its state when nothing
	// changed in etcd (retries, release timers). Default 2s.
	Interval time.Duration
	// Gather is how long a node's demand must have stayed unchanged before
	// it is planned, so the demand of pods that arrive together is served
	// by one call rather than one call per statement. Default 1s.
	Gather time.Duration
	// WarmGather replaces Gather for a demand with no pod waiting (only
	// the warm targets short): nothing waits on it, so it is left to
	// settle longer. A burst's first ADDs take the warm pool's addresses
	// before the rest of its pods reach the node; planned then, the warm
	// top-up costs a call and the pods that follow another. Default 5s,
	// aws-vpc-cni's pool loop period.
	WarmGather time.Duration
	// GatherMax bounds the wait for a demand that keeps changing: a node
	// that has wanted addresses this long is planned anyway. Default 5s (or
	// Gather, if longer); a Gather above it is lowered to it.
	GatherMax time.Duration
	// Lookahead is how far ahead of the EC2 token buckets actions are
	// planned: an action is queued only if its first call's bucket will
	// have a token for it within this long; the rest of the demand waits to
	// be planned as it stands then. Default 2s.
	Lookahead time.Duration
	// NewENILag is how much longer a new ENI takes than an Assign to bring
	// its addresses to a node once its calls are out: its Attach taking
	// effect, the instance seeing it in IMDS (about a second late on AWS
	// and in awssim), the agent setting it up. The time-optimal planner
	// ends the new ENIs this much before the Assigns. Default 1s;
	// negative means none.
	NewENILag time.Duration
	// PlanPolicy is what the planner makes least when a node's demand can
	// be met either way, calls or time (planner.Policy). Default
	// planner.TimeOptimal.
	PlanPolicy planner.Policy
	// RoundCPU reads the processor time each round runs (Stats.RoundCPU,
	// RoundCPUHist, SlowRoundCPU): the engine's loop keeps one thread for
	// its life, and the thread's CPU clock is read around every round. It
	// is a diagnostic, off by default, because it costs the rounds wall
	// time on a busy machine: every time the loop is preempted or wakes,
	// the scheduler must hand a processor to that one thread and wait for
	// the kernel to run it. In the 5,000-node runs on two cores the
	// rounds' median went from 25 to 32–40 ms with it (docs/benchmarks.md,
	// Run 16).
	RoundCPU bool
	// FailureBackoff is how long a node is left alone after one of its
	// actions failed; it doubles per consecutive failure up to 16x.
	// Default 2s.
	FailureBackoff time.Duration

	// ReleaseMargin is how many free addresses beyond its warm targets a
	// node may hold before the engine proposes taking some back. Default 4.
	ReleaseMargin int
	// ReleaseAfter is how long a surplus must last before a release is
	// proposed. Default 2m.
	ReleaseAfter time.Duration
	// ReleaseTimeout cancels a proposal the agent did not acknowledge in
	// this long. Default 5m.
	ReleaseTimeout time.Duration

	// StatusHold is how long a reason for a node's unmet demand must hold
	// before it is published to the node's status record (a clear is
	// published at once), so a moment's shortfall costs no write. Default
	// 5s.
	StatusHold time.Duration

	// Clock is the time the timers above are in: the wall clock (the zero
	// Clock), or a simulated EC2's faster one.
	Clock clock.Clock
}

// Fixed timings of the engine's own upkeep, not the user's to tune.
const (
	// settle is how long a wake-up from etcd waits for more changes to
	// arrive before planning, so a burst of demands lands in one plan and
	// the engine's own writes do not each cost a round.
	settle = 50 * time.Millisecond
	// workers bounds the EC2 actions carried out at once. An action waits
	// for its first call's token on its worker, so there are enough for a
	// burst's actions of every bucket at once: with 64, the Assigns of a
	// 96-node burst against buckets far slower than the model (before the
	// limiter has learned them) held every worker, and the Create bucket
	// stood idle for seconds with its actions queued behind them.
	workers = 256
	// staleIntent is how long an open intent written by the reconciler is
	// left to it before the engine resolves it as abandoned.
	staleIntent = time.Minute
	// replayCreateWithin is how old a create intent may be for a new
	// leader to send its request again (same ClientToken) when Describe
	// does not show the ENI. Older ones are failed.
	replayCreateWithin = time.Hour
	// retain is how long finished intents and releases stay in etcd (the
	// record of what was done, and what a new leader counts as delivered).
	retain = 15 * time.Minute
)

func (c *Config) defaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Gather <= 0 {
		c.Gather = DefaultGather
	}
	if c.WarmGather <= 0 {
		c.WarmGather = DefaultWarmGather
	}
	if c.GatherMax <= 0 {
		c.GatherMax = max(DefaultGatherMax, c.Gather)
	}
	c.Gather = min(c.Gather, c.GatherMax)
	if c.Lookahead <= 0 {
		c.Lookahead = DefaultLookahead
	}
	if c.PlanPolicy == 0 {
		c.PlanPolicy = planner.TimeOptimal
	}
	switch {
	case c.NewENILag == 0:
		c.NewENILag = DefaultNewENILag
	case c.NewENILag < 0:
		c.NewENILag = 0
	}
	if c.FailureBackoff <= 0 {
		c.FailureBackoff = DefaultFailureBackoff
	}
	if c.ReleaseMargin <= 0 {
		c.ReleaseMargin = 4
	}
	if c.ReleaseAfter <= 0 {
		c.ReleaseAfter = DefaultReleaseAfter
	}
	if c.ReleaseTimeout <= 0 {
		c.ReleaseTimeout = DefaultReleaseTimeout
	}
	if c.StatusHold <= 0 {
		c.StatusHold = DefaultStatusHold
	}
	for _, d := range []*time.Duration{
		&c.Interval, &c.Gather, &c.WarmGather, &c.GatherMax, &c.Lookahead, &c.NewENILag,
		&c.FailureBackoff, &c.ReleaseAfter, &c.ReleaseTimeout,
	} {
		*d = c.Clock.Wall(*d)
	}
}

// Defaults of the Config fields that are timers of the engine's own, in the
// clock's time.
const (
	DefaultInterval       = 2 * time.Second
	DefaultGather         = time.Second
	DefaultNewENILag      = time.Second
	DefaultGatherMax      = 5 * time.Second
	DefaultWarmGather     = 5 * time.Second
	DefaultLookahead      = 2 * time.Second
	DefaultFailureBackoff = 2 * time.Second
	DefaultReleaseAfter   = 2 * time.Minute
	DefaultReleaseTimeout = 5 * time.Minute
	DefaultStatusHold     = 5 * time.Second
)

// Timers returns c with every timer set: the defaults for those left zero,
// and all of them converted from the clock's time to the wall clock's (the
// engine runs on the latter). The engine's fixed upkeep timings (a wait
// for the CPU's sake, record keeping) are wall-clock times of their own.
func (c Config) Timers() Config {
	c.defaults()
	return c
}

// Engine carries out plans while this broker leads. Its in-memory state is a
// cache of etcd and EC2, rebuilt on every Run.
type Engine struct {
	cfg Config
	log *slog.Logger
	st  *serialStore
	ec2 EC2

	// inst is the cache of the nodes' instance facts (limits, subnets,
	// primary ENIs) described from EC2.
	inst *instances.Manager
	// unmet is why each node's demand is unmet, and what was published.
	unmet *unmetBook
	// view and updates are the records followed from etcd during a Run
	// (Run's goroutine alone uses them).
	view    *view
	updates <-chan store.FollowUpdate
	// publishing is set while a round's status changes are being written
	// (publishStatus); publishers waits for that at the end of a Run.
	publishing atomic.Bool
	publishers sync.WaitGroup
	// refreshing is set while the open intents are being read in full
	// (refreshIntents); publishers waits for that too.
	refreshing atomic.Bool
	// proposing is set while a round's release proposals are being
	// written (proposeReleases); publishers waits for that too.
	proposing atomic.Bool
	// pruning is set while finished intents and releases are being
	// deleted (prune); publishers waits for that too.
	pruning atomic.Bool
	// written is the revision of the engine's own latest write: a round
	// waits for the view to reach it (not other writers' later ones).
	written store.WriteMark

	mu    sync.Mutex
	stats Stats
}

// New returns an engine; call Run to start it.
func New(cfg Config) *Engine {
	cfg.defaults()
	log := cfg.Logger.With("component", "executor")
	return &Engine{
		cfg: cfg,
		log: log,
		// The book compares the clock's times: the hold stays in them.
		unmet: newUnmetBook(log, cfg.StatusHold),
		st:    newSerialStore(cfg.Store),
		ec2:   cfg.EC2,
		inst:  instances.New(cfg.Store, cfg.EC2, cfg.Interval),
		stats: newStats(),
	}
}

// Run resolves the open intents, then plans and carries out actions until
// ctx ends (leadership lost or shutdown). It returns nil when ctx is
// cancelled, the cause when ctx was cancelled with one
// (context.WithCancelCause), and rpcerr.ErrNotLeader when the store refused
// a fenced write (this broker was deposed). Run must not be called twice at
// once.
func (e *Engine) Run(ctx context.Context) error {
	if e.cfg.Cluster == "" || e.cfg.Store == nil || e.ec2 == nil {
		return fmt.Errorf("executor: config needs Cluster, Store and EC2")
	}
	if e.cfg.RoundCPU {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	ctx, cancel := context.WithCancelCause(store.WithWriteMark(ctx, &e.written))
	defer cancel(nil)
	rs := newRunState(cancel)
	e.unmet.startRun()

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { e.work(ctx, rs) })
	}

	// Follow before resolving, so no change made meanwhile goes unseen.
	e.view, e.updates = &view{}, e.st.Follow(ctx).Updates()
	defer func() { e.view, e.updates = nil, nil }()
	if err := e.seedLedger(ctx, rs); err != nil && ctx.Err() == nil {
		e.stopIfDeposed(rs, err)
		e.log.Warn("reading finished intents", "err", err)
	}
	if err := e.resolveAll(ctx, rs); err != nil && ctx.Err() == nil {
		e.stopIfDeposed(rs, err)
		e.log.Warn("resolving open intents", "err", err)
	}
	tick := time.NewTicker(e.cfg.Interval)
	defer tick.Stop()
	var pruned time.Time
	for ctx.Err() == nil {
		if now := e.cfg.Clock.Now(); now.Sub(pruned) > retain/10 && e.prune(ctx, rs, now) {
			pruned = now
		}
		if err := e.round(ctx, rs); err != nil && ctx.Err() == nil {
			e.stopIfDeposed(rs, err)
			e.log.Warn("planning round", "err", err)
		}
		select {
		case <-ctx.Done():
		case u, ok := <-e.updates:
			if !ok {
				continue
			}
			e.view.update(u)
			e.settle(ctx)
		case <-rs.kick:
			e.settle(ctx)
		case <-tick.C:
		}
	}
	wg.Wait()
	e.publishers.Wait()
	e.inst.Wait()
	if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		return cause
	}
	return nil
}

// prune deletes finished intents and releases older than retain, in a
// goroutine of its own so that no round waits for it: in a burst that is
// thousands of intents, a transaction per hundred of them, on an etcd that
// is busy with the burst's writes. At most one prune runs at once; it
// stops with the term (ctx), and Run waits for it (publishers). The view
// is Run's goroutine's alone, so the finished intents to delete are taken
// from it here, before the prune starts. It reports whether a prune
// started (false while the last one still runs).
func (e *Engine) prune(ctx context.Context, rs *runState, now time.Time) bool {
	if !e.pruning.CompareAndSwap(false, true) {
		return false
	}
	olderThan := now.Add(-retain)
	var old []store.Intent
	live := e.viewLive()
	if live {
		old = e.view.prunable(olderThan)
	}
	e.publishers.Go(func() {
		defer e.pruning.Store(false)
		e.pruneNow(ctx, rs, live, old, olderThan)
	})
	return true
}

// pruneNow deletes the finished intents old (those the view named), or
// when the view was not following etcd every finished intent older than
// olderThan, then the finished releases older than it.
func (e *Engine) pruneNow(ctx context.Context, rs *runState, live bool, old []store.Intent, olderThan time.Time) {
	var n int
	var err error
	if live {
		n, err = e.st.DeleteIntents(ctx, old)
	} else {
		n, err = e.st.PruneIntents(ctx, olderThan)
	}
	if err != nil && ctx.Err() == nil {
		e.stopIfDeposed(rs, err)
		e.log.Warn("pruning intents", "err", err)
	} else if n > 0 {
		e.log.Debug("pruned intents", "count", n)
	}
	if ctx.Err() != nil {
		return
	}
	if _, err := e.st.PruneReleases(ctx, olderThan); err != nil && ctx.Err() == nil {
		e.stopIfDeposed(rs, err)
		e.log.Warn("pruning releases", "err", err)
	}
}

// settle waits briefly for more changes so that they are planned together.
func (e *Engine) settle(ctx context.Context) {
	t := time.NewTimer(settle)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case u, ok := <-e.updates:
			if !ok {
				return
			}
			e.view.update(u)
		}
	}
}

// Unmet returns, per node, why its demand is not being met now: a
// *rpcerr.BudgetError when its subnet's budget refused, or another error. The
// server reports these to agents and allotctl.
func (e *Engine) Unmet() map[string]error { return e.unmet.all() }
