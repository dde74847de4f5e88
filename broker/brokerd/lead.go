package brokerd

import (
	"context"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/reconciler"
)

// lead is what the elected replica runs each term: a fresh engine and
// reconciler (their in-memory state is a cache of etcd and EC2, rebuilt
// every term), stopped when the term ends. If either stops on its own, the
// other is stopped too and the replica resigns, so a standby takes over.
func (b *Broker) lead(ctx context.Context) error {
	ec := b.cfg.Engine
	ec.Cluster, ec.Store, ec.EC2, ec.Logger = b.cfg.Cluster, b.st, b.ec2, b.log
	for _, d := range []*time.Duration{
		&ec.Interval, &ec.Gather, &ec.WarmGather, &ec.GatherMax, &ec.Lookahead,
		&ec.FailureBackoff, &ec.ReleaseAfter, &ec.ReleaseTimeout,
	} {
		*d = b.cfg.scaled(*d)
	}
	eng := executor.New(ec.WithTimeScale(b.cfg.TimeScale))
	b.mu.Lock()
	b.eng = eng
	b.mu.Unlock()

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return eng.Run(gctx) })
	if !b.cfg.NoReconciler {
		rec := reconciler.New(reconciler.Config{
			Cluster: b.cfg.Cluster, Store: b.st, EC2: b.ec2, Logger: b.log,
			Interval: b.cfg.scaled(time.Minute), Grace: b.cfg.scaled(time.Minute),
		})
		g.Go(func() error { return rec.Run(gctx) })
	}
	return g.Wait()
}
