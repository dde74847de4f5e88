// Package leader elects one broker replica through etcd
// (concurrency.Election) and runs the engine only while this replica leads.
// Standbys keep campaigning, so one of them takes over as soon as the
// leader's session lease is gone; the old leader's engine is cancelled the
// moment its own session ends, before a standby can have won.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/allotnet/allot/broker/store"
)

// ElectionSuffix names the election under the store prefix. Kept for
// compatibility: the election prefix is store.ElectionPrefixOf(Prefix),
// without the trailing slash (concurrency.Election adds "/<lease>").
const ElectionSuffix = "election/"

// DefaultTTL is the session lease unless configured. A standby takes over
// at most this long after the leader died, plus, when the dead leader's
// etcd member was also etcd's raft leader, etcd's own election and the one
// election timeout it adds to every lease on a raft leader change (about
// 2 s with etcd's defaults): 5 s keeps the first EC2 call of a new leader
// within 10 s of the old one's death, and still rides out etcd stalls of
// a few seconds without a leader change. An etcd that is busy (its raft
// loop late, its apply loop behind) can hold a renewal up for longer:
// docs/operations.md says when a longer TTL is worth its slower failover.
const DefaultTTL = 5 * time.Second

// Config configures an Elector.
type Config struct {
	// Client is the etcd client; the Elector does not close it.
	Client *clientv3.Client
	// Prefix is the store prefix ("/allot/v1/<cluster>/"); the election
	// lives under store.ElectionPrefixOf(Prefix) ("<Prefix>election").
	Prefix string
	// Name identifies this replica in GetStatus and logs. Required.
	Name string
	// TTL is the session lease: how long a dead leader keeps the lead.
	// Rounded up to whole seconds; DefaultTTL if zero.
	TTL time.Duration
	// RetryDelay is the pause before campaigning again after a lost session
	// or a failed run; 1s if zero.
	RetryDelay time.Duration
	// Logger; slog.Default() if nil.
	Logger *slog.Logger
}

// Elector campaigns for leadership and reports who leads.
type Elector struct {
	cfg     Config
	key     string
	leading atomic.Bool

	mu      sync.Mutex
	leaseID clientv3.LeaseID // of the latest session
	fence   store.Fence      // of the latest term won
}

// New checks cfg and returns an Elector that has not campaigned yet.
func New(cfg Config) (*Elector, error) {
	if cfg.Client == nil {
		return nil, errors.New("leader: etcd client is required")
	}
	if cfg.Name == "" {
		return nil, errors.New("leader: replica name is required")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Elector{cfg: cfg, key: store.ElectionPrefixOf(cfg.Prefix)}, nil
}

// Key returns the election key prefix (store.ElectionPrefix, no trailing
// slash).
func (e *Elector) Key() string { return e.key }

// IsLeader reports whether this replica leads right now.
func (e *Elector) IsLeader() bool { return e.leading.Load() }

// Leader returns the name of the current leader, or "" when nobody leads.
// It reads etcd, so it answers the same on every replica.
func (e *Elector) Leader(ctx context.Context) (string, error) {
	resp, err := e.cfg.Client.Get(ctx, e.key+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("read election leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// Run campaigns until ctx ends. Each time this replica wins, it calls fn with
// a context that is cancelled when the session is lost (lease expired or
// revoked, etcd unreachable for the TTL) or ctx ends. When fn returns while
// still leading, Run resigns so a standby can take over, waits RetryDelay
// and campaigns again. On ctx end Run resigns and revokes its lease, so a
// standby does not wait out the TTL. Run returns nil after a clean shutdown.
func (e *Elector) Run(ctx context.Context, fn func(ctx context.Context) error) error {
	log := e.cfg.Logger.With("replica", e.cfg.Name)
	for ctx.Err() == nil {
		if err := e.term(ctx, log, fn); err != nil && ctx.Err() == nil {
			log.Warn("leader election: term ended", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(e.cfg.RetryDelay):
		}
	}
	return nil
}

// term runs one session: campaign, lead, step down.
func (e *Elector) term(ctx context.Context, log *slog.Logger, fn func(ctx context.Context) error) error {
	ttl := int64((e.cfg.TTL + time.Second - 1) / time.Second)
	granted := time.Now()
	g, err := e.cfg.Client.Grant(ctx, ttl)
	if err != nil {
		return fmt.Errorf("start election session: grant lease: %w", err)
	}
	// The lease is renewed by a renewer of this term's (renew.go); the
	// session's own keepalive runs too and only adds renewals, but the
	// term ends by the renewer's word alone.
	rn := newRenewer(e.cfg.Client, g.ID, time.Duration(g.TTL)*time.Second, granted)
	renewCtx, stopRenew := context.WithCancel(ctx)
	renewing := make(chan struct{})
	go func() {
		defer close(renewing)
		rn.run(renewCtx)
	}()
	defer func() {
		stopRenew()
		<-renewing
		// Revoking the lease makes our election key (if any) disappear at
		// once, so a standby need not wait out the TTL.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := e.cfg.Client.Revoke(rctx, g.ID); err != nil && ctx.Err() == nil {
			log.Debug("leader election: revoke session lease", "err", err)
		}
	}()
	sess, err := concurrency.NewSession(e.cfg.Client, concurrency.WithLease(g.ID), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("start election session: %w", err)
	}
	// Not sess.Close: it revokes with the session's context, which is
	// ctx, which may be why we are here; the deferred revoke above does.
	defer sess.Orphan()
	e.mu.Lock()
	e.leaseID = g.ID
	e.mu.Unlock()

	el, err := e.campaign(ctx, sess, rn)
	if err != nil {
		return err
	}

	leadCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(rn.lost, cancel) // lease lost: stop leading now
	defer stop()

	// Fence every store write of this term on our election key: should the
	// lease expire before the renewer notices and cancels leadCtx, the
	// store refuses the writes (rpcerr.ErrNotLeader) instead of letting
	// two leaders write intents at once.
	fence := store.Fence{Key: el.Key(), Rev: el.Rev()}
	e.mu.Lock()
	e.fence = fence
	e.mu.Unlock()
	leadCtx = store.WithFence(leadCtx, fence.Key, fence.Rev)

	e.leading.Store(true)
	log.Info("leader election: leading", "lease", fmt.Sprintf("%x", g.ID), "key", fence.Key, "rev", fence.Rev)
	runErr := fn(leadCtx)
	e.leading.Store(false)

	stepDown(ctx, log, rn, el, runErr)
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return fmt.Errorf("leader work: %w", runErr)
	}
	return nil
}

// campaign waits until this replica wins the election in sess, or the
// lease (rn) or ctx ends.
func (e *Elector) campaign(ctx context.Context, sess *concurrency.Session, rn *renewer) (*concurrency.Election, error) {
	// A campaign must stop when the lease is lost, or a replica whose key
	// expired would wait forever for keys older than its own.
	campCtx, stopCamp := context.WithCancel(ctx)
	defer stopCamp()
	defer context.AfterFunc(rn.lost, stopCamp)()
	el := concurrency.NewElection(sess, e.key)
	if err := el.Campaign(campCtx, e.cfg.Name); err != nil {
		if lerr := rn.Err(); lerr != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("campaign: %w", lerr)
		}
		return nil, fmt.Errorf("campaign: %w", err)
	}
	if err := rn.Err(); err != nil {
		return nil, fmt.Errorf("lost while campaigning: %w", err)
	}
	return el, nil
}

// stepDown ends a term: it resigns unless the session is already lost
// (then there is nothing left to resign).
func stepDown(ctx context.Context, log *slog.Logger, rn *renewer, el *concurrency.Election, runErr error) {
	// The renewer stops with ctx too; only without a shutdown is its end a
	// loss.
	lost := rn.Err() != nil && ctx.Err() == nil
	switch {
	case lost:
		log.Warn("leader election: session lost, stepped down", "err", rn.Err(), "renewals", rn.acknowledged())
		return
	case ctx.Err() != nil:
		log.Info("leader election: shutting down, resigning")
	default:
		log.Warn("leader election: leader work returned, resigning", "err", runErr)
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	if err := el.Resign(rctx); err != nil {
		log.Warn("leader election: resign", "err", err)
	}
}

// Lease returns the lease ID of the current session (0 before the first).
func (e *Elector) Lease() clientv3.LeaseID {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leaseID
}

// Fence returns the election key and create revision of the latest term
// this replica won (zero before the first). The context Run passes to the
// leader's work already carries it (store.WithFence); this is for callers
// that build their own contexts.
func (e *Elector) Fence() store.Fence {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.fence
}
