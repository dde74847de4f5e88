// Package reconciler compares the broker's records in etcd with what EC2
// shows, on the leader, at an interval. It reports every disagreement and
// repairs only what is safe to repair without an operator: it collects
// leaked ENIs (only available ENIs carrying our tags, seen on two passes and
// described again right before the delete), removes the records of ENIs EC2
// said twice do not exist, checks every subnet record against
// DescribeSubnets and the records it summarises (correcting what
// disagrees), keeps each subnet's use by others current, and releases the
// ENIs of nodes whose instance EC2 reports terminated or gone.
// It never acts on missing evidence: an agent that stopped reporting, or a
// node with no pods, frees nothing here.
package reconciler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/allotnet/allot/broker/clock"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// Store is the part of the broker's etcd store the reconciler uses.
type Store interface {
	// ReadReconcile reads every ENI, node, subnet and open intent at one
	// revision.
	ReadReconcile(ctx context.Context) (store.ReconcileRecords, error)
	DeleteNode(ctx context.Context, id string) error
	GetENI(ctx context.Context, id string) (store.ENI, error)
	GetSubnet(ctx context.Context, id string) (store.Subnet, error)
	CorrectSubnet(ctx context.Context, id string, t store.SubnetTruth, observedAttached int64) (store.SubnetCorrection, error)
	ListOpenIntents(ctx context.Context) ([]store.Intent, error)
	BeginIntent(ctx context.Context, in store.Intent) (store.Intent, error)
	CompleteDelete(ctx context.Context, intentID, eniID string) error
	FailIntent(ctx context.Context, intentID string, cause error) error
}

// EC2 is the part of the EC2 client the reconciler uses.
type EC2 interface {
	DescribeENIs(ctx context.Context, in ec2client.DescribeENIsInput) ([]ec2client.ENIInfo, error)
	DescribeSubnets(ctx context.Context, ids []string) ([]ec2client.SubnetInfo, error)
	DescribeInstances(ctx context.Context, ids []string) ([]ec2client.InstanceInfo, error)
	DeleteENI(ctx context.Context, eniID string) error
}

var (
	_ Store = (*store.Store)(nil)
	_ EC2   = (*ec2client.Client)(nil)
)

// Config is everything the reconciler needs; main builds it.
type Config struct {
	// Cluster is the cluster name in our ENIs' allot.dev/cluster tag.
	Cluster string
	Store   Store
	EC2     EC2
	Logger  *slog.Logger
	// Interval is the time between passes' starts, default 1m; a pass
	// that takes more than a tenth of it spreads the next ones out to
	// ten times its own time (nextPass).
	Interval time.Duration
	// Grace is the least time between the first and the second pass that
	// see the same thing before it is acted on (a leak collected, a missing
	// ENI's record removed, a gone instance's ENIs released); records
	// younger than Grace are not judged missing. Default 1m.
	Grace time.Duration
	// DryRun reports and repairs nothing.
	DryRun bool
	// Clock is the time Interval and Grace are in: the wall clock (the
	// zero Clock), or a simulated EC2's faster one.
	Clock clock.Clock
}

// Reconciler runs passes on the leader.
type Reconciler struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	leaks    map[string]sighting // ENI -> seen as a leak candidate
	missing  map[string]sighting // ENI -> its record, absent in EC2
	gone     map[string]sighting // instance -> gone in EC2
	last     Report
	counters Stats
}

// sighting is when something was first seen on consecutive passes, and on
// how many.
type sighting struct {
	first  time.Time
	passes int
}

// Stats are the reconciler's counters.
type Stats struct {
	Passes int64
	// Collected is leaked ENIs deleted.
	Collected int64
	// Forgotten is records removed because EC2 said twice the ENI does not
	// exist.
	Forgotten int64
	// NodesRemoved is nodes whose instance was gone and whose ENIs were
	// released.
	NodesRemoved int64
	// SubnetsUpdated counts changes of a subnet's use by others.
	SubnetsUpdated int64
	// Errors counts repairs that failed.
	Errors int64
}

// New returns a reconciler; call Run on the leader, or Check anywhere.
func New(cfg Config) *Reconciler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.Grace <= 0 {
		cfg.Grace = time.Minute
	}
	cfg.Interval, cfg.Grace = cfg.Clock.Wall(cfg.Interval), cfg.Clock.Wall(cfg.Grace)
	return &Reconciler{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "reconciler"),
		leaks:   map[string]sighting{},
		missing: map[string]sighting{},
		gone:    map[string]sighting{},
	}
}

// Run makes a pass now and then every Interval until ctx ends; it returns
// nil then. Failed passes are logged and retried at the next tick, except
// that a write refused by the leadership fence (rpcerr.ErrNotLeader) ends Run
// with that error.
func (r *Reconciler) Run(ctx context.Context) error {
	if r.cfg.Cluster == "" || r.cfg.Store == nil || r.cfg.EC2 == nil {
		return fmt.Errorf("reconciler: config needs Cluster, Store and EC2")
	}
	for {
		start := time.Now()
		if _, err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			if errors.Is(err, rpcerr.ErrNotLeader) {
				// Deposed: another replica may lead; stop writing.
				return fmt.Errorf("reconciler: %w", err)
			}
			r.log.Warn("reconcile pass", "err", err)
		}
		t := time.NewTimer(nextPass(r.cfg.Interval, time.Since(start)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// passShare is the most of its time the reconciler spends in passes.
const passShare = 10

// nextPass is the wait after a pass that took took: the rest of Interval,
// but at least passShare-1 times took. A pass describes every ENI and
// instance of the cluster, so in a large cluster (or against a slow EC2)
// it takes long; the passes then spread out instead of taking the
// leader's CPU from the rounds.
func nextPass(interval, took time.Duration) time.Duration {
	return max(interval-took, (passShare-1)*took)
}

// Pass compares once and, unless DryRun, repairs what is safe. It returns
// the report of what it found (each finding says what was done).
func (r *Reconciler) Pass(ctx context.Context) (Report, error) {
	obs, err := r.observe(ctx)
	if err != nil {
		return Report{}, err
	}
	rep := obs.report()
	r.mu.Lock()
	r.counters.Passes++
	r.mu.Unlock()
	r.repair(ctx, obs, &rep)
	r.mu.Lock()
	r.last = rep
	r.mu.Unlock()
	for _, f := range rep.Findings {
		r.log.Info("drift", "kind", f.Kind, "eni", f.ENIID, "instance", f.InstanceID, "subnet", f.SubnetID,
			"detail", f.Detail, "action", f.Action)
	}
	return rep, nil
}

// Check compares etcd with EC2 once and reports every disagreement. It
// changes nothing, neither in etcd nor in EC2, nor the reconciler's memory
// of earlier passes, so allotctl may call it on any replica at any time.
func (r *Reconciler) Check(ctx context.Context) (Report, error) {
	obs, err := r.observe(ctx)
	if err != nil {
		return Report{}, err
	}
	return obs.report(), nil
}

// Last returns the report of the latest pass.
func (r *Reconciler) Last() Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// Stats returns the counters.
func (r *Reconciler) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counters
}

func (r *Reconciler) count(f func(*Stats)) {
	r.mu.Lock()
	f(&r.counters)
	r.mu.Unlock()
}
