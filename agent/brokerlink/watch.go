package brokerlink

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// watchLoop keeps a session with the broker: register, apply its record,
// follow the node's stream. When a session ends it waits (exponential
// backoff with jitter, reset by a session that got as far as the stream)
// and starts another, on whichever broker the connection reaches.
func (l *Link) watchLoop(ctx context.Context) {
	delay := l.cfg.BackoffMin
	for ctx.Err() == nil {
		progressed, err := l.session(ctx)
		if ctx.Err() != nil {
			return
		}
		l.setError(err)
		if progressed {
			delay = l.cfg.BackoffMin
		}
		wait := jitter(delay)
		l.log.Warn("broker session ended; reconnecting", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		delay = l.cfg.nextBackoff(delay)
	}
}

// nextBackoff is the wait after one of d: twice as long, within
// [BackoffMin, BackoffMax].
func (c *Config) nextBackoff(d time.Duration) time.Duration {
	return min(max(2*d, c.BackoffMin), c.BackoffMax)
}

// jitter spreads reconnects of many agents over [d/2, d).
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}

// session runs one registration and watch stream until it fails. progressed
// reports that the broker answered the registration.
func (l *Link) session(ctx context.Context) (progressed bool, err error) {
	resp, err := l.register(ctx)
	if err != nil {
		return false, fmt.Errorf("register: %w", err)
	}
	l.log.Info("registered with broker", "enis", len(resp.GetEnis()), "revision", resp.GetRevision(),
		"max_addresses", resp.GetMaxAddresses())
	l.applyMu.Lock()
	l.applyLocked(resp.GetEnis(), resp.GetRevision())
	l.applyMu.Unlock()
	poke(l.kick)

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := l.client.WatchNode(sctx, &allotv1.WatchNodeRequest{InstanceId: l.node.GetInstanceId()})
	if err != nil {
		return true, fmt.Errorf("watch: %w", err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return true, fmt.Errorf("watch: %w", err)
		}
		l.applyEvent(ctx, ev)
	}
}

// applyEvent applies one snapshot of the stream: ENIs first, so addresses
// a finished release took away leave the pool, then the release proposals.
func (l *Link) applyEvent(ctx context.Context, ev *allotv1.NodeEvent) {
	l.applyMu.Lock()
	defer l.applyMu.Unlock()
	if !l.applyLocked(ev.GetEnis(), ev.GetRevision()) {
		return
	}
	l.learnLimits(ev.GetMaxEnis(), ev.GetIpv4PerEni())
	l.setUnmet(ev.GetUnmet())
	l.handleReleasesLocked(ctx, ev.GetReleases(), ev.GetReleaseStates())
}

// setUnmet records (and logs, when it changes) why the broker says the
// node's demand is unmet; nil clears it.
func (l *Link) setUnmet(u *allotv1.UnmetStatus) {
	l.mu.Lock()
	changed := l.status.UnmetReason != u.GetReason() || l.status.UnmetMessage != u.GetMessage()
	l.status.UnmetReason, l.status.UnmetMessage = u.GetReason(), u.GetMessage()
	l.mu.Unlock()
	switch {
	case !changed:
	case u.GetReason() == "":
		l.log.Info("broker: demand no longer unmet")
	default:
		l.log.Warn("broker cannot meet the node's demand", "reason", u.GetReason(), "message", u.GetMessage())
	}
}
