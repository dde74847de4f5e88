// Package brokerlink is the agent's connection to the broker. It registers
// the node and compares the broker's record of its ENIs with the pool,
// watches the node's allocation stream (reconnecting with backoff to
// whichever broker answers), hands what the broker delivered to the
// Arrivals that bring it into the pool, states the pool's demand and
// excess, reports usage in batches, and answers release proposals with
// what the pool agrees to give back. It only speaks gRPC: confirming
// deliveries in IMDS and setting up ENIs is the daemon's.
//
// It never frees what a pod holds: an address the broker stops listing
// leaves the pool only if the pool says no pod holds it (pool.Retain), and a
// release is acknowledged only for addresses the pool has set aside
// (pool.ProposeRelease). While the broker is unreachable the pool keeps
// serving ADDs from what it has.
package brokerlink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/allotnet/allot/agent/identity"
	"github.com/allotnet/allot/agent/pool"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Defaults for the Config fields left zero.
const (
	DefaultUsageInterval     = time.Second
	DefaultHeartbeatInterval = 10 * time.Second
	// DefaultDemandInterval paces demand statements: each is an etcd write
	// and a planning round on the broker, and a burst of ADDs changes the
	// demand once per pod. A tenth of a second keeps a node to ten writes a
	// second while a waiting ADD still goes out at once.
	DefaultDemandInterval = 100 * time.Millisecond
	DefaultBackoffMin     = 100 * time.Millisecond
	DefaultBackoffMax     = 5 * time.Second
	DefaultCallTimeout    = 10 * time.Second
)

// Config configures a Link. Intervals are real time: they pace calls and
// polls, and mean nothing to allocation state.
type Config struct {
	// Identity is the node as IMDS describes it; Register sends it.
	Identity identity.Identity
	// NodeName is the Kubernetes node name Register sends beside the
	// identity; empty outside Kubernetes.
	NodeName string
	// PrefixMode asks for /28 prefixes instead of secondary IPs.
	PrefixMode bool
	// Targets are the warm-pool targets the demand is computed from.
	Targets pool.Targets
	// Limits override the instance type's ENI limits. Zero means they
	// are taken from the broker (max_enis and ipv4_per_eni of the
	// registration answer and the watch stream), the one source of them:
	// it reads them from EC2. Until the broker knows them, the warm
	// targets ask for nothing (pool.Shortfall with no capacity); pods
	// waiting are stated all the same.
	Limits pool.Limits
	// UsageInterval batches usage reports: at most one per interval, and
	// only when usage changed.
	UsageInterval time.Duration
	// HeartbeatInterval renews the node's liveness lease.
	HeartbeatInterval time.Duration
	// DemandInterval coalesces demand statements: the first change after
	// a quiet interval is sent at once, later changes within the interval
	// go out together at its end, with the latest values. Zero means
	// DefaultDemandInterval; negative sends every change at once.
	DemandInterval time.Duration
	// BackoffMin and BackoffMax bound the reconnect backoff.
	BackoffMin, BackoffMax time.Duration
	// CallTimeout bounds each unary call to the broker.
	CallTimeout time.Duration
	Logger      *slog.Logger
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.UsageInterval, DefaultUsageInterval)
	def(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	switch {
	case c.DemandInterval == 0:
		c.DemandInterval = DefaultDemandInterval
	case c.DemandInterval < 0:
		c.DemandInterval = 0
	}
	def(&c.BackoffMin, DefaultBackoffMin)
	def(&c.BackoffMax, DefaultBackoffMax)
	def(&c.CallTimeout, DefaultCallTimeout)
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = c.BackoffMin
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Deps are the link's collaborators.
type Deps struct {
	Client   allotv1.NodeServiceClient
	Pool     *pool.Pool
	Arrivals Arrivals
	// Waiting, if set, returns the span context of an ADD waiting for an
	// address (invalid when none waits): a demand with pods waiting is
	// stated in that ADD's trace.
	Waiting func() trace.SpanContext
}

// Status is what the link knows about its broker, for STATUS and
// introspection.
type Status struct {
	// Connected is true from a successful registration until the watch
	// stream or a call fails.
	Connected bool
	// LastError is the last failure talking to the broker.
	LastError string
	// Revision is the broker state revision last applied.
	Revision int64
	// MaxAddresses is the broker's figure of addresses the node can hold.
	MaxAddresses int
	Limits       pool.Limits
	// Demand is the demand last sent.
	Demand pool.Demand
	// Known is the address slots (secondary addresses, plus 16 per /28
	// prefix) of the broker snapshot applied last: what the next demand
	// is computed against, sent with it so the broker can tell what it
	// delivered since.
	Known int
	// Unconfirmed counts delivered addresses not in the pool yet: those on
	// an ENI new to the agent, which waits for IMDS to show it.
	Unconfirmed int
	// UnmetReason and UnmetMessage say why the broker is not meeting the
	// node's demand ("budget_exhausted", "node_full", "not_ready"; the
	// message names the subnet, its limit and use for a budget refusal).
	// Empty when the broker reports nothing in the way.
	UnmetReason  string
	UnmetMessage string
}

// Link is one agent's connection to the broker.
type Link struct {
	cfg      Config
	log      *slog.Logger
	client   allotv1.NodeServiceClient
	pool     *pool.Pool
	arrivals Arrivals
	waiting  func() trace.SpanContext
	node     *allotv1.NodeIdentity

	// applyMu serialises applying broker state and answering releases.
	applyMu sync.Mutex
	lastRev int64
	// acked are releases acknowledged by this process.
	acked map[string]bool
	// seenMu makes a demand's inputs agree: it is held while a broker
	// snapshot moves addresses into Known, Arrivals and the pool, and
	// sendDemand reads all three under it (the pool and what Arrivals
	// awaits inside Arrivals.Hold). Otherwise a delivery could be counted
	// in Known but in neither of the others, and be asked for again.
	seenMu sync.Mutex

	mu        sync.Mutex
	status    Status
	listed    map[netip.Addr]bool
	listedPfx []netip.Prefix
	// kick asks the reporter to resend demand and usage (after a new
	// registration: the broker may have lost what we last said).
	kick chan struct{}
	// recalc asks the reporter to recompute the demand (what is awaited
	// from IMDS changed).
	recalc chan struct{}
	// relimit asks the reporter to register again for the node's limits,
	// which the broker had not learnt at the last heartbeat.
	relimit chan struct{}
	// beating is set once the node has registered: heartbeats go out from
	// then on.
	beating atomic.Bool
}

// New returns a link; Run starts it.
func New(cfg Config, deps Deps) (*Link, error) {
	cfg.defaults()
	if deps.Client == nil || deps.Pool == nil || deps.Arrivals == nil {
		return nil, errors.New("brokerlink: client, pool and arrivals are required")
	}
	node, err := nodeIdentity(cfg.Identity)
	if err != nil {
		return nil, err
	}
	l := &Link{
		cfg: cfg, log: cfg.Logger.With("component", "brokerlink"),
		client: deps.Client, pool: deps.Pool, arrivals: deps.Arrivals, waiting: deps.Waiting, node: node,
		acked:   map[string]bool{},
		listed:  map[netip.Addr]bool{},
		kick:    make(chan struct{}, 1),
		recalc:  make(chan struct{}, 1),
		relimit: make(chan struct{}, 1),
	}
	l.status.Limits = cfg.Limits
	return l, nil
}

// nodeIdentity converts IMDS's view of the node into the registration
// message.
func nodeIdentity(id identity.Identity) (*allotv1.NodeIdentity, error) {
	p, ok := id.Primary()
	if !ok {
		return nil, fmt.Errorf("brokerlink: identity of %s has no primary interface", id.InstanceID)
	}
	n := &allotv1.NodeIdentity{
		InstanceId:       id.InstanceID,
		InstanceType:     id.InstanceType,
		AvailabilityZone: id.AvailabilityZone,
		VpcId:            p.VPCID,
		SubnetId:         p.SubnetID,
		PrimaryEniId:     p.ENIID,
		PrimaryMac:       p.MAC,
		PrimaryIp:        id.PrimaryIPv4.String(),
		SecurityGroupIds: p.SecurityGroupIDs,
	}
	for _, c := range p.VPCCIDRs {
		n.VpcCidrs = append(n.VpcCidrs, c.String())
	}
	return n, nil
}

// Run talks to the broker until ctx ends: the watch loop (register, apply
// snapshots, reconnect), the reporter (demand, usage) and the heartbeat.
// It returns when all have stopped.
func (l *Link) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { l.watchLoop(ctx) })
	wg.Go(func() { l.reportLoop(ctx) })
	wg.Go(func() { l.heartbeatLoop(ctx) })
	<-ctx.Done()
	wg.Wait()
	return nil
}

// Status returns the link's state.
func (l *Link) Status() Status {
	l.mu.Lock()
	s := l.status
	l.mu.Unlock()
	l.arrivals.Hold(func(n int) { s.Unconfirmed = n })
	return s
}

// Recalc asks for the demand to be computed again: what Arrivals awaits
// changed without the pool changing.
func (l *Link) Recalc() { poke(l.recalc) }

// poke signals a buffered channel without blocking.
func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Connected reports whether the broker answered last time it was asked.
func (l *Link) Connected() bool { return l.Status().Connected }

// Limits are the ENI limits the demand is computed with.
func (l *Link) Limits() pool.Limits {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status.Limits
}

func (l *Link) setError(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.status.Connected = false
	l.status.LastError = err.Error()
}

// call bounds one unary call.
func (l *Link) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.cfg.CallTimeout)
}

func (l *Link) modeProto() allotv1.AddressMode {
	if l.cfg.PrefixMode {
		return allotv1.AddressMode_ADDRESS_MODE_PREFIX
	}
	return allotv1.AddressMode_ADDRESS_MODE_SECONDARY_IP
}

// register announces the node and records what the broker says about its
// capacity.
func (l *Link) register(ctx context.Context) (*allotv1.RegisterResponse, error) {
	t := l.cfg.Targets
	cctx, cancel := l.call(ctx)
	defer cancel()
	resp, err := l.client.Register(cctx, &allotv1.RegisterRequest{
		Node:     l.node,
		NodeName: l.cfg.NodeName,
		Mode:     l.modeProto(),
		Warm: &allotv1.WarmTargets{
			WarmIpTarget:     int32(t.WarmIPs),
			MinimumIpTarget:  int32(t.MinimumIPs),
			WarmEniTarget:    int32(t.WarmENIs),
			WarmPrefixTarget: int32(t.WarmPrefixes),
			MaxEnis:          int32(t.MaxENIs),
		},
	})
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.status.Connected, l.status.LastError = true, ""
	l.status.MaxAddresses = int(resp.GetMaxAddresses())
	l.mu.Unlock()
	l.learnLimits(resp.GetMaxEnis(), resp.GetIpv4PerEni())
	return resp, nil
}

// learnLimits takes the instance limits the broker records, unless the
// configuration gave them: the broker reads them from EC2 for the
// instance type, and caps max_enis by the agent's setting.
func (l *Link) learnLimits(maxENIs, ipv4PerENI int32) {
	if l.cfg.Limits != (pool.Limits{}) || maxENIs <= 0 || ipv4PerENI <= 0 {
		return
	}
	lim := pool.Limits{MaxENIs: int(maxENIs), IPv4PerENI: int(ipv4PerENI)}
	l.mu.Lock()
	changed := l.status.Limits != lim
	l.status.Limits = lim
	l.mu.Unlock()
	if changed {
		l.log.Info("instance limits from the broker", "max_enis", lim.MaxENIs, "ipv4_per_eni", lim.IPv4PerENI)
		poke(l.recalc)
	}
}
