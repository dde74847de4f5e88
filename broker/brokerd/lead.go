package brokerd

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/reconciler"
	"github.com/allotnet/allot/broker/subnets"
)

// lead is what the elected replica runs each term: a fresh engine,
// reconciler and pod-subnet discovery (their in-memory state is a cache of
// etcd and EC2, rebuilt every term), stopped when the term ends. If one
// fails, the others are stopped too and the replica resigns, so a standby
// takes over.
// Whatever may change EC2 goes through the split-brain guard (guardTerm).
func (b *Broker) lead(ctx context.Context) error {
	ec2c, ctx, stop, err := b.guardTerm(ctx)
	if err != nil {
		return err
	}
	defer stop()
	ec := b.cfg.Engine
	ec.Cluster, ec.Store, ec.EC2, ec.Logger, ec.Clock = b.cfg.Cluster, b.st, ec2c, b.log, b.cfg.Clock
	eng := executor.New(ec)
	b.mu.Lock()
	b.eng = eng
	b.mu.Unlock()

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return eng.Run(gctx) })
	d := subnets.New(subnets.Config{
		Selector: b.cfg.PodSubnets, EC2: b.ec2, Store: b.st, Logger: b.log, Clock: b.cfg.Clock,
	})
	g.Go(func() error { return d.Run(gctx) })
	if !b.cfg.NoReconciler {
		rec := reconciler.New(reconciler.Config{
			Cluster: b.cfg.Cluster, Store: b.st, EC2: ec2c, Logger: b.log, Clock: b.cfg.Clock,
		})
		b.mu.Lock()
		b.rec = rec
		b.mu.Unlock()
		g.Go(func() error { return rec.Run(gctx) })
	}
	err = g.Wait()
	if gerr := ec2c.Err(); gerr != nil {
		return gerr // resign; the next term's gate refuses until the cause is gone
	}
	return err
}
