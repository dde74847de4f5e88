package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A term's lease is kept alive by a renewer of its own rather than by the
// etcd client's keepalive, whose schedule leaves a busy etcd little room:
// it sends the next renewal a third of the TTL after the last answer, all
// renewals of a client go one after another on one stream (etcd answers a
// stream's renewals in order, so one held up holds up every one behind
// it), and it gives the lease up a TTL after the last answer it received.
// With a 5 s TTL a renewal had about 3 s to go there and back. The
// renewer sends one every TTL/5, each on a stream of its own with at most
// a few under way, so one held up in etcd (a renewal that arrives while
// etcd's raft loop is late waits for its apply loop to catch up; a
// handler or the client's reader that waits for CPU) does not hold up
// the next.
//
// The term ends when etcd answers that the lease is gone, or when no
// renewal sent in the last TTL was acknowledged: etcd renews a lease at
// the earliest when the renewal reaches it, which is after it was sent,
// so the lease lives at least until the latest acknowledged renewal's
// send time plus the TTL, and a standby cannot have won before then. A
// dead or frozen leader's lease expires in etcd a TTL after its last
// renewal, as before.

// renewalsInFlight bounds the renewals under way at once.
const renewalsInFlight = 4

// errLeaseGone is why a term ended when its lease is gone or could not
// be shown to live.
var errLeaseGone = errors.New("leader election: session lease lost")

// renewer keeps one lease alive and says when it can no longer be sure
// that it lives.
type renewer struct {
	cli   *clientv3.Client
	id    clientv3.LeaseID
	ttl   time.Duration
	every time.Duration

	mu sync.Mutex
	// until is how long the lease lives at least: the send time of the
	// latest acknowledged renewal (or of the grant) plus the TTL.
	until time.Time
	// renewed counts the acknowledged renewals (for tests).
	renewed int

	lost   context.Context // ends when the lease is lost
	cancel context.CancelCauseFunc
	slots  chan struct{}
	wg     sync.WaitGroup
}

// newRenewer returns a renewer for the lease id of ttl, granted at or
// after granted. Call run to start renewing.
func newRenewer(cli *clientv3.Client, id clientv3.LeaseID, ttl time.Duration, granted time.Time) *renewer {
	lost, cancel := context.WithCancelCause(context.Background())
	return &renewer{
		cli: cli, id: id, ttl: ttl, every: min(max(ttl/5, 100*time.Millisecond), time.Second),
		until: granted.Add(ttl), lost: lost, cancel: cancel, slots: make(chan struct{}, renewalsInFlight),
	}
}

// Done is closed when the lease is lost; context.Cause(r.lost) says why.
func (r *renewer) Done() <-chan struct{} { return r.lost.Done() }

// Err is why the lease is lost, nil while it is not.
func (r *renewer) Err() error {
	if r.lost.Err() == nil {
		return nil
	}
	return context.Cause(r.lost)
}

// run renews until ctx ends or the lease is lost, then waits for the
// renewals under way.
func (r *renewer) run(ctx context.Context) {
	defer r.wg.Wait()
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	r.renew(ctx)
	for {
		r.mu.Lock()
		left := time.Until(r.until)
		r.mu.Unlock()
		if left <= 0 {
			r.cancel(fmt.Errorf("%w: no renewal acknowledged in the last %s", errLeaseGone, r.ttl))
			return
		}
		deadline := time.NewTimer(left)
		select {
		case <-ctx.Done():
			deadline.Stop()
			r.cancel(ctx.Err())
			return
		case <-r.lost.Done():
			deadline.Stop()
			return
		case <-tick.C:
			r.renew(ctx)
		case <-deadline.C:
		}
		deadline.Stop()
	}
}

// renew sends a renewal on a stream of its own unless renewalsInFlight
// are already under way.
func (r *renewer) renew(ctx context.Context) {
	select {
	case r.slots <- struct{}{}:
	default:
		return
	}
	sent := time.Now()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() { <-r.slots }()
		// A renewal answered later than the TTL is of no use.
		rctx, cancel := context.WithTimeout(ctx, r.ttl)
		defer cancel()
		resp, err := r.cli.KeepAliveOnce(rctx, r.id)
		switch {
		case err == nil:
			r.mu.Lock()
			if until := sent.Add(time.Duration(resp.TTL) * time.Second); until.After(r.until) {
				r.until = until
			}
			r.renewed++
			r.mu.Unlock()
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			r.cancel(fmt.Errorf("%w: etcd no longer has it", errLeaseGone))
		}
		// Any other failure (a timeout, etcd unreachable) is retried by
		// the next renewal; until says how long that may go on.
	}()
}

// acknowledged is how many renewals etcd acknowledged.
func (r *renewer) acknowledged() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.renewed
}
