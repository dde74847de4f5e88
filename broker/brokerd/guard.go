package brokerd

import (
	"context"
	"errors"
	"time"

	"github.com/allotnet/allot/broker/splitguard"
)

// guardRetry is the pause before looking again after a look failed for
// another reason than a split brain (EC2 unreachable, throttled).
const guardRetry = time.Second

// guardTerm opens a term's gate: it reads the state's ID, looks at the
// cluster's ENIs, and returns the EC2 client the term's work must use (it
// refuses every mutating call once it sees another state's ENI) with a
// context that ends when it does. While the ENIs show another state it does
// not return: the replica keeps the lead, so no replica of this state
// changes EC2 either, and every look says why again (at ERROR).
func (b *Broker) guardTerm(ctx context.Context) (*splitguard.Client, context.Context, func(), error) {
	id, err := b.st.StoreID(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	for {
		tctx, cancel := context.WithCancelCause(ctx)
		g, err := splitguard.New(splitguard.Config{
			Cluster: b.cfg.Cluster, StoreID: id, EC2: b.ec2, Logger: b.log,
			OnTrip: func(err error) { cancel(err) },
		})
		if err != nil {
			cancel(nil)
			return nil, nil, nil, err
		}
		err = g.Check(tctx)
		if err == nil {
			b.log.Info("no other broker's ENIs in the cluster; leading", "store_id", id)
			return g, tctx, func() { cancel(nil) }, nil
		}
		cancel(nil)
		wait := splitguard.DefaultMaxAge
		if !errors.Is(err, splitguard.ErrSplitBrain) {
			b.log.Warn("could not look at the cluster's ENIs; not changing EC2 until a look succeeds", "err", err)
			wait = guardRetry
		}
		select {
		case <-ctx.Done():
			return nil, nil, nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}
