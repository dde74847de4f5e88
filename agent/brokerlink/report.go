package brokerlink

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/allotnet/allot/agent/pool"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// reporter is the state of reportLoop: what the broker was last told.
type reporter struct {
	demandSent bool
	demand     pool.Demand
	known      int // Known sent with demand
	// demandAt is when the last SetDemand call went out; demandDue says a
	// change waits for the end of its DemandInterval.
	demandAt     time.Time
	demandDue    bool
	usageSent    bool
	assigned     []netip.Addr
	free         []netip.Addr
	excess       int
	usageDirty   bool
	registeredOK bool
	// backoff is the wait after the last failed demand or usage call
	// (zero after a success), and retryAt when the next may go out.
	backoff time.Duration
	retryAt time.Time
}

// failed backs the reporter off after a call the broker did not take
// (isBusy): exponentially from BackoffMin to BackoffMax, with jitter, so
// that agents a busy broker refused together do not all come back
// together. Other failures are tried again at the next usage tick, as
// before.
func (r *reporter) failed(cfg *Config, err error) {
	if !isBusy(err) {
		return
	}
	r.backoff = cfg.nextBackoff(r.backoff)
	r.retryAt = time.Now().Add(jitter(r.backoff))
}

// succeeded ends the backoff.
func (r *reporter) succeeded() { r.backoff, r.retryAt = 0, time.Time{} }

// waiting reports whether the reporter is backing off now.
func (r *reporter) waiting() bool { return !r.retryAt.IsZero() && time.Now().Before(r.retryAt) }

// reportLoop tells the broker what the pool needs and holds.
//
// Demand is paced by DemandInterval: the first change after a quiet
// interval goes out at once — an ADD waiting on an empty pool is the most
// urgent thing a node can say — and changes within the interval coalesce
// into one statement at its end, with the latest values, so a burst of
// ADDs costs the broker a few etcd writes instead of one per pod. Calls are
// made from this loop alone, so at most one is in flight. An unchanged
// demand is not stated again: it carries Known, so the broker can tell
// exactly what it delivered since, however long ago it was stated.
//
// Usage goes out in batches, at most once per UsageInterval and only when
// it changed. Both are sent again after every registration, and retried
// while the broker is unreachable or busy: after a failed call neither goes
// out again before a backoff (exponential, with jitter) has passed, and
// then at the next usage tick.
func (l *Link) reportLoop(ctx context.Context) {
	usage := time.NewTicker(l.cfg.UsageInterval)
	defer usage.Stop()
	due := time.NewTimer(time.Hour)
	due.Stop()
	defer due.Stop()
	var r reporter
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
			r.demandSent, r.usageSent, r.registeredOK = false, false, true
			r.succeeded() // the broker just answered the registration
			l.beating.Store(true)
			l.sendDemand(ctx, &r)
			l.sendUsage(ctx, &r, true)
		case <-l.pool.Changed():
			r.usageDirty = true
			l.demandChanged(ctx, &r, due)
		case <-l.recalc:
			r.usageDirty = true // the excess depends on the limits too
			l.demandChanged(ctx, &r, due)
		case <-due.C:
			r.demandDue = false
			l.sendDemand(ctx, &r)
		case <-usage.C:
			if !r.demandSent {
				l.demandChanged(ctx, &r, due) // the last call failed
			}
			l.sendUsage(ctx, &r, false)
		case <-l.relimit:
			l.registerForLimits(ctx, &r)
		}
	}
}

// demandChanged states the demand now if no call went out within the last
// DemandInterval, or else makes sure it is stated at the interval's end.
func (l *Link) demandChanged(ctx context.Context, r *reporter, due *time.Timer) {
	if r.demandDue {
		return
	}
	if wait := l.cfg.DemandInterval - time.Since(r.demandAt); wait > 0 && !r.demandAt.IsZero() {
		r.demandDue = true
		due.Reset(wait)
		return
	}
	l.sendDemand(ctx, r)
}

// sendDemand sends the pool's demand, with the Known it was computed
// against, if either differs from what the broker last acknowledged. Known,
// what Arrivals awaits and the pool are read together under seenMu: a
// snapshot applied after the read makes Known stale and the demand too
// high by what it delivered, which is exactly what the broker counts as on
// its way and takes off; the apply pokes a recalculation that states both
// afresh.
func (l *Link) sendDemand(ctx context.Context, r *reporter) {
	if !r.registeredOK {
		return
	}
	if r.waiting() {
		r.demandSent = false // the usage tick states it once the backoff ends
		return
	}
	l.seenMu.Lock()
	l.mu.Lock()
	known := l.status.Known
	l.mu.Unlock()
	lim := l.Limits()
	var d pool.Demand
	l.arrivals.Hold(func(awaited int) { d = netDemand(l.pool.Demand(l.cfg.Targets, lim), awaited) })
	l.seenMu.Unlock()
	if r.demandSent && d == r.demand && known == r.known {
		return
	}
	r.demandAt = time.Now()
	cctx, cancel := l.call(ctx)
	defer cancel()
	if d.Pending > 0 && l.waiting != nil {
		if sc := l.waiting(); sc.IsValid() {
			cctx = trace.ContextWithSpanContext(cctx, sc)
		}
	}
	_, err := l.client.SetDemand(cctx, &allotv1.SetDemandRequest{
		InstanceId:    l.node.GetInstanceId(),
		Pending:       int32(d.Pending),
		WarmShortfall: int32(d.WarmShortfall),
		Known:         proto.Int32(int32(known)),
	})
	if err != nil {
		r.demandSent = false
		r.failed(&l.cfg, err)
		if ctx.Err() == nil {
			l.log.Warn("demand not sent; will retry", "pending", d.Pending, "warm_shortfall", d.WarmShortfall,
				"known", known, "err", err)
		}
		return
	}
	r.demandSent, r.demand, r.known = true, d, known
	r.succeeded()
	l.mu.Lock()
	l.status.Demand = d
	l.mu.Unlock()
	l.log.Debug("demand sent", "pending", d.Pending, "warm_shortfall", d.WarmShortfall, "known", known)
}

// sendUsage reports which listed addresses pods hold, which are free, and
// how many of the free ones the warm targets do not need (pool.Excess), if
// that changed since the last report. Addresses the broker doesn't list on
// the node are left out: it would refuse the whole report for them.
func (l *Link) sendUsage(ctx context.Context, r *reporter, force bool) {
	if !r.registeredOK || (!force && !r.usageDirty && r.usageSent) || r.waiting() {
		return
	}
	assigned, free := l.pool.Usage()
	l.mu.Lock()
	assigned = slices.DeleteFunc(assigned, func(a netip.Addr) bool { return !l.isListed(a) })
	free = slices.DeleteFunc(free, func(a netip.Addr) bool { return !l.isListed(a) })
	l.mu.Unlock()
	excess := pool.Excess(l.cfg.Targets, l.Limits(), len(assigned), len(free))
	r.usageDirty = false
	if r.usageSent && slices.Equal(assigned, r.assigned) && slices.Equal(free, r.free) && excess == r.excess {
		return
	}
	seq, err := l.pool.NextUsageSeq()
	if err != nil {
		l.log.Error("cannot persist usage sequence; usage not reported", "err", err)
		return
	}
	req := &allotv1.ReportUsageRequest{InstanceId: l.node.GetInstanceId(), Seq: seq, Excess: proto.Int32(int32(excess))}
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
		r.failed(&l.cfg, err)
		if ctx.Err() == nil {
			l.log.Warn("usage not reported; will retry", "seq", seq, "err", err)
		}
		return
	}
	r.usageSent, r.assigned, r.free, r.excess = true, assigned, free, excess
	r.succeeded()
}

// heartbeatLoop renews the node's liveness lease every HeartbeatInterval
// once the node has registered, from a goroutine of its own: a heartbeat
// costs the broker no etcd write (after the first), and it must not wait
// behind a demand or usage call that waits for a slow etcd, or the node
// would be taken for gone while it is only waiting. While the node's
// limits are still unknown it has the reporter register again (the broker
// learns them from EC2 after the first registration).
func (l *Link) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(l.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !l.beating.Load() {
			continue
		}
		cctx, cancel := l.call(ctx)
		_, err := l.client.Heartbeat(cctx, &allotv1.HeartbeatRequest{InstanceId: l.node.GetInstanceId()})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				l.log.Warn("heartbeat failed", "err", err)
			}
			continue
		}
		if l.Limits() == (pool.Limits{}) {
			poke(l.relimit)
		}
	}
}

// registerForLimits registers again while the node's limits are unknown,
// and states the demand the limits they bring make.
func (l *Link) registerForLimits(ctx context.Context, r *reporter) {
	if !r.registeredOK || l.Limits() != (pool.Limits{}) {
		return
	}
	if _, err := l.register(ctx); err != nil {
		l.log.Warn("re-registration for limits failed", "err", err)
		return
	}
	r.demandSent = false
	l.sendDemand(ctx, r)
}

// netDemand takes out of the pool's demand what is already on its way: the
// addresses the broker delivered that wait to be seen on the node. They serve waiting
// ADDs first, then the warm target. Stating them again would have the
// broker deliver twice.
func netDemand(d pool.Demand, unconfirmed int) pool.Demand {
	served := min(d.Pending, unconfirmed)
	d.Pending -= served
	d.WarmShortfall = max(d.WarmShortfall-(unconfirmed-served), 0)
	return d
}
