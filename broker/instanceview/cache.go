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
	"golang.org/x/sync/singleflight"
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

// Cache answers Get from memory while fresh, and asks EC2 once for any
// number of concurrent Gets of the same instance otherwise. Misses are not
// cached: callers only ask about instances with a signed identity document
// or a registration, and a launch must be seen as soon as EC2 shows it.
type Cache struct {
	ec2 EC2
	ttl time.Duration
	now func() time.Time

	group singleflight.Group
	mu    sync.Mutex
	m     map[string]entry
	calls int64
}

type entry struct {
	inst Instance
	at   time.Time
}

// New returns a cache over ec2; ttl <= 0 means DefaultTTL, now nil means
// time.Now.
func New(ec2 EC2, ttl time.Duration, now func() time.Time) *Cache {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Cache{ec2: ec2, ttl: ttl, now: now, m: map[string]entry{}}
}

// Get returns the instance, from memory when the last answer is younger
// than the TTL. An instance EC2 does not list is ErrNotFound.
func (c *Cache) Get(ctx context.Context, id string) (Instance, error) {
	c.mu.Lock()
	e, ok := c.m[id]
	c.mu.Unlock()
	if ok && c.now().Sub(e.at) < c.ttl {
		return e.inst, nil
	}
	v, err, _ := c.group.Do(id, func() (any, error) { return c.describe(ctx, id) })
	if err != nil {
		return Instance{}, err
	}
	return v.(Instance), nil
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

func (c *Cache) describe(ctx context.Context, id string) (Instance, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	got, err := c.ec2.DescribeInstances(ctx, []string{id})
	if err != nil {
		if ec2client.IsNotFound(err) {
			return Instance{}, fmt.Errorf("%s: %w", id, ErrNotFound)
		}
		return Instance{}, fmt.Errorf("describe instance %s: %w", id, err)
	}
	for _, in := range got {
		if in.ID == id {
			c.mu.Lock()
			c.m[id] = entry{inst: in, at: c.now()}
			c.mu.Unlock()
			return in, nil
		}
	}
	c.Forget(id)
	return Instance{}, fmt.Errorf("%s: %w", id, ErrNotFound)
}
