// Package instanceview is the broker's cached view of what EC2 says about the
// instances it serves. Everything the broker takes as fact about a node
// that EC2 can answer — its account, VPC, subnet, zone, type, primary
// network interface and security groups — comes from here, never from the
// node's own claims, and one DescribeInstances per node is enough for a
// while: entries are refreshed when they age past the TTL.
package instanceview

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
)

// ErrNotFound means EC2 does not know the instance (in the broker's
// account and region).
var ErrNotFound = errors.New("instance not found in EC2")

// Instance is what EC2 says about one instance.
type Instance = ec2client.InstanceInfo

// EC2 is the call the cache makes (broker/ec2client, rate-limited there).
type EC2 interface {
	DescribeInstances(ctx context.Context, ids []string) ([]ec2client.InstanceInfo, error)
}

var _ EC2 = (*ec2client.Client)(nil)

// DefaultTTL is how long an answer is used before EC2 is asked again.
const DefaultTTL = 5 * time.Minute

// Cache answers Get from memory while fresh. Otherwise the Gets that
// arrive within Window of each other share one DescribeInstances (up to
// MaxBatch IDs), so a fleet registering at once costs a few calls, not one
// per node. Misses are not cached: callers only ask about instances with a
// signed identity document or a registration, and a launch must be seen as
// soon as EC2 shows it.
type Cache struct {
	ec2    EC2
	ttl    time.Duration
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	m       map[string]entry
	pending map[string][]chan result // IDs waiting for the next batch
	calls   int64
}

type entry struct {
	inst Instance
	at   time.Time
}

type result struct {
	inst Instance
	err  error
}

// Window is how long the first Get of a batch waits for others.
const Window = 20 * time.Millisecond

// MaxBatch is the most IDs one DescribeInstances carries (ec2client splits
// longer lists itself; this keeps one slow call from holding many).
const MaxBatch = 200

// New returns a cache over ec2; ttl <= 0 means DefaultTTL, now nil means
// time.Now.
func New(ec2 EC2, ttl time.Duration, now func() time.Time) *Cache {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Cache{ec2: ec2, ttl: ttl, window: Window, now: now, m: map[string]entry{}, pending: map[string][]chan result{}}
}

// Get returns the instance, from memory when the last answer is younger
// than the TTL. An instance EC2 does not list is ErrNotFound.
func (c *Cache) Get(ctx context.Context, id string) (Instance, error) {
	ch := make(chan result, 1)
	c.mu.Lock()
	if e, ok := c.m[id]; ok && c.now().Sub(e.at) < c.ttl {
		c.mu.Unlock()
		return e.inst, nil
	}
	first := len(c.pending) == 0
	c.pending[id] = append(c.pending[id], ch)
	c.mu.Unlock()
	if first {
		// The batch's call must outlive the caller that happened to start
		// it: the others wait on it too.
		time.AfterFunc(c.window, func() { c.flush(context.WithoutCancel(ctx)) })
	}
	select {
	case r := <-ch:
		return r.inst, r.err
	case <-ctx.Done():
		return Instance{}, ctx.Err()
	}
}

// Forget drops the cached answer, so the next Get asks EC2.
func (c *Cache) Forget(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// Calls is how many DescribeInstances calls the cache has made.
func (c *Cache) Calls() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// flush describes the waiting IDs, MaxBatch at a time, and answers their
// waiters.
func (c *Cache) flush(ctx context.Context) {
	for {
		c.mu.Lock()
		batch := make(map[string][]chan result, min(len(c.pending), MaxBatch))
		for id, chs := range c.pending {
			if len(batch) == MaxBatch {
				break
			}
			batch[id] = chs
			delete(c.pending, id)
		}
		if len(batch) > 0 {
			c.calls++
		}
		c.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		c.describe(ctx, batch)
	}
}

func (c *Cache) describe(ctx context.Context, batch map[string][]chan result) {
	ids := make([]string, 0, len(batch))
	for id := range batch {
		ids = append(ids, id)
	}
	got, err := c.ec2.DescribeInstances(ctx, ids)
	var failed map[string]error
	if err != nil && len(ids) > 1 {
		// One failed answer must not fail a fleet's registrations: ask
		// for each instance alone.
		got, failed = c.one(ctx, ids)
		err = nil
	}
	found := make(map[string]Instance, len(got))
	for _, in := range got {
		found[in.ID] = in
	}
	now := c.now()
	c.mu.Lock()
	for id := range batch {
		if in, ok := found[id]; ok && err == nil && failed[id] == nil {
			c.m[id] = entry{inst: in, at: now}
		} else {
			delete(c.m, id)
		}
	}
	c.mu.Unlock()
	for id, chs := range batch {
		r := result{inst: found[id]}
		switch _, ok := found[id]; {
		case err != nil:
			r.err = fmt.Errorf("describe instance %s: %w", id, err)
		case failed[id] != nil:
			r.err = fmt.Errorf("describe instance %s: %w", id, failed[id])
		case !ok:
			r.err = fmt.Errorf("%s: %w", id, ErrNotFound)
		}
		for _, ch := range chs {
			ch <- r
		}
	}
}

// one describes ids one at a time; failed holds the IDs that got an error.
func (c *Cache) one(ctx context.Context, ids []string) (out []Instance, failed map[string]error) {
	failed = map[string]error{}
	for _, id := range ids {
		got, err := c.ec2.DescribeInstances(ctx, []string{id})
		if err != nil {
			failed[id] = err
			continue
		}
		out = append(out, got...)
	}
	return out, failed
}
