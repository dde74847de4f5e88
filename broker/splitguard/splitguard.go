// Package splitguard keeps two brokers that do not share their state from
// both changing one cluster's network interfaces.
//
// Brokers of one cluster share one etcd, and etcd elects one leader among
// them. Brokers that each keep their own etcd under the same cluster name
// (two replicas started with a member alone each, a wiped data directory, an
// old deployment left running) would each elect themselves and each
// treat the other's ENIs as leaks. So every ENI the broker creates carries
// its state's ID (store.StoreID) in the TagStoreID tag, and the guard,
// wrapped around the leader's EC2 client, refuses every mutating call once
// it has seen an ENI of the cluster tagged with another ID: before the
// first mutating call of a term, whenever its last full look is older than
// MaxAge, and in every DescribeNetworkInterfaces answer the engine and the
// reconciler read anyway. The reconciler's describe of every ENI of the
// cluster counts as a full look, and mutating calls that find the look
// stale together share one new look.
package splitguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
)

// TagStoreID is the tag carrying the ID of the state (etcd) whose broker
// created the ENI.
const TagStoreID = "allot.dev/store-id"

// DefaultMaxAge is how old the last full look at the cluster's ENIs may be
// before a mutating call looks again.
const DefaultMaxAge = 30 * time.Second

// ErrSplitBrain is what every error of a tripped guard matches.
var ErrSplitBrain = errors.New("split brain: another broker with its own state manages this cluster's ENIs")

// ForeignError says which ENI showed the other state.
type ForeignError struct {
	Cluster string
	// ENI is one of the cluster's ENIs tagged with another store ID; Count
	// how many such ENIs the look found.
	ENI   string
	Count int
	// Theirs is the other store ID, Ours this broker's.
	Theirs, Ours string
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("refusing to change EC2: %d ENI(s) of cluster %q (e.g. %s) carry %s=%s, but this broker's state is %s; "+
		"another broker with its own etcd manages the same cluster name. Run every replica on one etcd "+
		"(--etcd-initial-cluster or --etcd-endpoints) and stop the other, or give it another --cluster",
		e.Count, e.Cluster, e.ENI, TagStoreID, e.Theirs, e.Ours)
}

// Is makes errors.Is(err, ErrSplitBrain) true.
func (e *ForeignError) Is(target error) bool { return target == ErrSplitBrain }

// Config configures a guard.
type Config struct {
	// Cluster is the allot.dev/cluster tag value of this cluster's ENIs.
	Cluster string
	// StoreID is this broker's state ID (store.StoreID).
	StoreID string
	// EC2 is the client to guard.
	EC2 *ec2client.Client
	// MaxAge; DefaultMaxAge if zero. A look that took longer than a
	// tenth of it stays fresh for ten times its own time.
	MaxAge time.Duration
	// OnTrip, if set, is called once, when the guard first refuses.
	OnTrip func(error)
	// Logger; slog.Default() if nil.
	Logger *slog.Logger
	// Now; time.Now if nil.
	Now func() time.Time
}

// Client is the guarded EC2 client: reads pass through (and are
// inspected), mutating calls are refused once the guard has tripped. Make a
// new one for each leader term.
type Client struct {
	*ec2client.Client
	cfg Config

	look sync.Mutex // one full look at a time

	mu      sync.Mutex
	tripped error
	lookAt  time.Time
	// lookTook is how long the latest look took: a look that takes long
	// (a large cluster) keeps the next one at least lookSpacing times
	// that far away.
	lookTook time.Duration
}

// New returns a guard that has not looked yet.
func New(cfg Config) (*Client, error) {
	switch {
	case cfg.EC2 == nil:
		return nil, errors.New("splitguard: EC2 client is required")
	case cfg.Cluster == "" || cfg.StoreID == "":
		return nil, errors.New("splitguard: cluster name and store ID are required")
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{Client: cfg.EC2, cfg: cfg}, nil
}

// Err is the error the guard refuses with, nil while it has not tripped.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tripped
}

// Check looks at every ENI tagged with the cluster's name and trips the
// guard if one carries another store ID. It returns the guard's error, or
// the describe's.
func (c *Client) Check(ctx context.Context) error {
	c.look.Lock()
	defer c.look.Unlock()
	return c.lookLocked(ctx)
}

// lookLocked is Check with the look's lock held.
func (c *Client) lookLocked(ctx context.Context) error {
	at := c.cfg.Now()
	enis, err := c.Client.DescribeENIs(ctx, ec2client.DescribeENIsInput{
		Tags: map[string]string{ec2client.TagCluster: c.cfg.Cluster},
	})
	if err != nil {
		return fmt.Errorf("look for another broker's ENIs before changing EC2: %w", err)
	}
	if err := c.inspect(enis); err != nil {
		return err
	}
	c.looked(at)
	return nil
}

// looked notes a full look that began at at and found nothing foreign.
func (c *Client) looked(at time.Time) {
	took := c.cfg.Now().Sub(at)
	c.mu.Lock()
	if at.After(c.lookAt) {
		c.lookAt, c.lookTook = at, took
	}
	c.mu.Unlock()
}

// lookSpacing is how many times its own duration a look stays fresh at
// least, so that looks at a large cluster's ENIs take at most about a
// tenth of the leader's time.
const lookSpacing = 10

// state is whether the guard's last full look is recent, and its error.
func (c *Client) state() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	maxAge := max(c.cfg.MaxAge, lookSpacing*c.lookTook)
	return c.cfg.Now().Sub(c.lookAt) < maxAge && !c.lookAt.IsZero(), c.tripped
}

// allow is the gate of every mutating call. When the last look is stale,
// the calls that arrive meanwhile wait for one new look and share it:
// the engine's workers reach the gate together, and a look describes
// every ENI of the cluster.
func (c *Client) allow(ctx context.Context) error {
	if fresh, err := c.state(); err != nil || fresh {
		return err
	}
	c.look.Lock()
	defer c.look.Unlock()
	if fresh, err := c.state(); err != nil || fresh {
		return err // another call looked while this one waited
	}
	return c.lookLocked(ctx)
}

// inspect trips the guard if any of enis belongs to the cluster and carries
// another store ID. ENIs without the tag (made before the tag existed) are
// not evidence either way.
func (c *Client) inspect(enis []ec2client.ENIInfo) error {
	var found *ForeignError
	for _, e := range enis {
		theirs := e.Tags[TagStoreID]
		if e.Tags[ec2client.TagCluster] != c.cfg.Cluster || theirs == "" || theirs == c.cfg.StoreID {
			continue
		}
		if found == nil {
			found = &ForeignError{Cluster: c.cfg.Cluster, ENI: e.ID, Theirs: theirs, Ours: c.cfg.StoreID}
		}
		found.Count++
	}
	if found == nil {
		return c.Err()
	}
	c.mu.Lock()
	first := c.tripped == nil
	if first {
		c.tripped = found
	}
	err := c.tripped
	c.mu.Unlock()
	if first {
		c.cfg.Logger.Error("split brain: this broker stops changing EC2", "err", found,
			"cluster", found.Cluster, "eni", found.ENI, "their_store_id", found.Theirs, "our_store_id", found.Ours)
		if c.cfg.OnTrip != nil {
			c.cfg.OnTrip(found)
		}
	}
	return err
}

// DescribeENIs passes through and inspects what EC2 answered. A describe
// of every ENI the cluster's brokers create (the cluster's tag, optionally
// the owner's, nothing narrower: the reconciler's every pass) counts as a
// full look when it shows nothing foreign, so the gate need not describe
// them all again.
func (c *Client) DescribeENIs(ctx context.Context, in ec2client.DescribeENIsInput) ([]ec2client.ENIInfo, error) {
	at := c.cfg.Now()
	enis, err := c.Client.DescribeENIs(ctx, in)
	if err != nil {
		return nil, err
	}
	if c.inspect(enis) == nil && c.fullLook(in) {
		c.looked(at)
	}
	return enis, nil
}

// fullLook reports whether a describe lists every ENI a broker of the
// cluster creates: every one carries the cluster's and the owner's tags.
func (c *Client) fullLook(in ec2client.DescribeENIsInput) bool {
	if len(in.IDs) > 0 || len(in.TagKeys) > 0 || in.InstanceID != "" || in.Status != "" || in.SubnetID != "" ||
		in.Tags[ec2client.TagCluster] != c.cfg.Cluster {
		return false
	}
	for k, v := range in.Tags {
		if k != ec2client.TagCluster && (k != ec2client.TagOwner || v != ec2client.OwnerValue) {
			return false
		}
	}
	return true
}

// CreateENI tags the new ENI with this broker's store ID.
func (c *Client) CreateENI(ctx context.Context, in ec2client.CreateENIInput) (ec2client.ENIInfo, error) {
	if err := c.allow(ctx); err != nil {
		return ec2client.ENIInfo{}, err
	}
	in.Tags = maps.Clone(in.Tags)
	if in.Tags == nil {
		in.Tags = map[string]string{}
	}
	in.Tags[TagStoreID] = c.cfg.StoreID
	return c.Client.CreateENI(ctx, in)
}
