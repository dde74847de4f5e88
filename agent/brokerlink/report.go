package brokerlink

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"github.com/allotnet/allot/agent/pool"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// reporter is the state of reportLoop: what the broker was last told.
type reporter struct {
	demandSent   bool
	demand       pool.Demand
	demandTicks  int // usage intervals since an unmet demand was last sent
	usageSent    bool
	assigned     []netip.Addr
	free         []netip.Addr
	usageDirty   bool
	registeredOK bool
}

// reportLoop tells the broker what the pool needs and holds. Demand goes
// out as soon as it changes — an ADD waiting on an empty pool is the most
// urgent thing a node can say — with at most one call in flight, so a burst
// of changes coalesces into the latest value. Usage goes out in batches, at
// most once per UsageInterval and only when it changed. Both are sent again
// after every registration, and retried while the broker is unreachable.
func (l *Link) reportLoop(ctx context.Context) {
	usage := time.NewTicker(l.cfg.UsageInterval)
	defer usage.Stop()
	hb := time.NewTicker(l.cfg.HeartbeatInterval)
	defer hb.Stop()
	var r reporter
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
			r.demandSent, r.usageSent, r.registeredOK = false, false, true
			l.sendDemand(ctx, &r)
			l.sendUsage(ctx, &r, true)
		case <-l.pool.Changed():
			r.usageDirty = true
			l.sendDemand(ctx, &r)
		case <-l.recalc:
			l.sendDemand(ctx, &r)
		case <-usage.C:
			if r.demandSent && r.demand != (pool.Demand{}) {
				r.demandTicks++
			}
			if !r.demandSent || r.demandTicks >= DemandRestateIntervals {
				// An unmet demand is stated again now and then even when
				// unchanged: the broker counts what it delivered after
				// the last statement as still on its way, so a node whose
				// demand stays short would otherwise wait for a change
				// that never comes.
				r.demandSent = false
				l.sendDemand(ctx, &r)
			}
			l.sendUsage(ctx, &r, false)
		case <-hb.C:
			l.heartbeat(ctx, &r)
		}
	}
}

// sendDemand sends the pool's demand if it differs from what the broker
// last acknowledged.
func (l *Link) sendDemand(ctx context.Context, r *reporter) {
	if !r.registeredOK {
		return
	}
	d := netDemand(l.pool.Demand(l.cfg.Targets, l.Limits()), l.confirm.count())
	if r.demandSent && d == r.demand {
		return
	}
	cctx, cancel := l.call(ctx)
	defer cancel()
	_, err := l.client.SetDemand(cctx, &allotv1.SetDemandRequest{
		InstanceId:    l.node.GetInstanceId(),
		Pending:       int32(d.Pending),
		WarmShortfall: int32(d.WarmShortfall),
	})
	if err != nil {
		r.demandSent = false
		if ctx.Err() == nil {
			l.log.Warn("demand not sent; will retry", "pending", d.Pending, "warm_shortfall", d.WarmShortfall, "err", err)
		}
		return
	}
	r.demandSent, r.demand, r.demandTicks = true, d, 0
	l.mu.Lock()
	l.status.Demand = d
	l.mu.Unlock()
	l.log.Debug("demand sent", "pending", d.Pending, "warm_shortfall", d.WarmShortfall)
}

// sendUsage reports which listed addresses pods hold and which are free,
// if that changed since the last report. Addresses the broker doesn't list
// on the node are left out: it would refuse the whole report for them.
func (l *Link) sendUsage(ctx context.Context, r *reporter, force bool) {
	if !r.registeredOK || (!force && !r.usageDirty && r.usageSent) {
		return
	}
	assigned, free := l.pool.Usage()
	l.mu.Lock()
	assigned = slices.DeleteFunc(assigned, func(a netip.Addr) bool { return !l.isListed(a) })
	free = slices.DeleteFunc(free, func(a netip.Addr) bool { return !l.isListed(a) })
	l.mu.Unlock()
	r.usageDirty = false
	if r.usageSent && slices.Equal(assigned, r.assigned) && slices.Equal(free, r.free) {
		return
	}
	seq, err := l.pool.NextUsageSeq()
	if err != nil {
		l.log.Error("cannot persist usage sequence; usage not reported", "err", err)
		return
	}
	req := &allotv1.ReportUsageRequest{InstanceId: l.node.GetInstanceId(), Seq: seq}
	for _, a := range assigned {
		req.Assigned = append(req.Assigned, a.String())
	}
	for _, a := range free {
		req.Free = append(req.Free, a.String())
	}
	cctx, cancel := l.call(ctx)
	defer cancel()
	if _, err := l.client.ReportUsage(cctx, req); err != nil {
		r.usageSent = false
		if ctx.Err() == nil {
			l.log.Warn("usage not reported; will retry", "seq", seq, "err", err)
		}
		return
	}
	r.usageSent, r.assigned, r.free = true, assigned, free
}

// heartbeat renews the liveness lease, and refreshes the registration while
// the node's limits are still unknown (the broker learns them from EC2
// after the first registration).
func (l *Link) heartbeat(ctx context.Context, r *reporter) {
	if !r.registeredOK {
		return
	}
	cctx, cancel := l.call(ctx)
	defer cancel()
	if _, err := l.client.Heartbeat(cctx, &allotv1.HeartbeatRequest{InstanceId: l.node.GetInstanceId()}); err != nil {
		if ctx.Err() == nil {
			l.log.Warn("heartbeat failed", "err", err)
		}
		return
	}
	if l.Limits() == (pool.Limits{}) {
		if _, err := l.register(ctx); err != nil {
			l.log.Warn("re-registration for limits failed", "err", err)
		} else {
			r.demandSent = false
			l.sendDemand(ctx, r)
		}
	}
}

// netDemand takes out of the pool's demand what is already on its way: the
// addresses the broker delivered that wait for IMDS. They serve waiting
// ADDs first, then the warm target. Stating them again would have the
// broker deliver twice.
func netDemand(d pool.Demand, unconfirmed int) pool.Demand {
	served := min(d.Pending, unconfirmed)
	d.Pending -= served
	d.WarmShortfall = max(d.WarmShortfall-(unconfirmed-served), 0)
	return d
}
