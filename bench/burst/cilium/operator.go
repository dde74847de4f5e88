// Package cilium is the burst benchmark's model of the other central
// design: Cilium's operator in ENI mode, one process for the whole cluster
// that alone calls EC2, through one client-side rate limiter for every
// call, with the nodes' agents taking addresses from the pools it fills.
//
// It follows cilium/cilium at commit 0013798761ee (pkg/ipam/node.go and
// pkg/aws/eni/node.go), with the EC2 client of pkg/aws/ec2/ec2.go at
// ddfb86f857f0, the instances cache of pkg/aws/eni/instances.go at
// 12891dbb1632 and the node manager of pkg/ipam/node_manager.go at
// 19d034c0a1e8; defaults from operator/option and pkg/defaults:
//
//   - One rate limiter (golang.org/x/time/rate) in front of every EC2 call:
//     --limit-ipam-api-qps 4, --limit-ipam-api-burst 20. Behind it the
//     SDK's standard retryer (config.LoadDefaultConfig: 3 attempts,
//     exponential backoff) meets RequestLimitExceeded; a call that still
//     fails fails the node's maintenance, which triggers a resync and is
//     tried again after it.
//   - A per-node pool maintainer (a trigger) runs MaintainIPPool: one
//     action per run, an AssignPrivateIpAddresses (or AssignENIPrefixes) on
//     the first ENI with room, or, when none has room or the assign fails,
//     CreateInterface: CreateNetworkInterface with the addresses (or
//     prefixes) in the same call, AttachNetworkInterface (retried on an
//     index conflict), ModifyNetworkInterfaceAttribute (DeleteOnTermination).
//     The amount is neededIPs (pre-allocate 8, min-allocate 0,
//     max-above-watermark 0: calculateNeededIPs) plus the node's pending
//     pods beyond it (surge allocation), capped by the ENI's room.
//   - After an action the node waits for a resync (resyncNeeded) before it
//     acts again, and the action triggers one: the instances API resync
//     lists VPCs, subnets, security groups and every ENI (DescribeVpcs,
//     DescribeSubnets, DescribeSecurityGroups, DescribeNetworkInterfaces),
//     all through the same limiter, then attends every node in deficit,
//     largest first. Addresses from an assign reach the node's pool with
//     that resync; a new ENI's with the create's answer. A resync also runs
//     every minute.
//   - The agent (pkg/ipam/crd.go) hands out addresses from the pool at once
//     or fails the ADD; it reports the addresses it uses in the CiliumNode
//     status at most every 15 s (--ipam-cilium-node-update-rate), and the
//     operator reacts to that update.
//
// Kubernetes itself (the CiliumNode round trips, the pod watcher) is not
// modelled as latency: the operator sees pending pods and the agents see
// their pools at once, which favours Cilium.
package cilium

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"golang.org/x/time/rate"

	"github.com/allotnet/allot/internal/sdkbody"
)

// Defaults of the operator and the agent.
const (
	DefaultQPS            = 4
	DefaultBurst          = 20
	DefaultPreAllocate    = 8
	DefaultResyncInterval = time.Minute
	DefaultNodeUpdateRate = 15 * time.Second
	// DefaultMaxAttempts is config.LoadDefaultConfig's retryer.
	DefaultMaxAttempts = 3
)

// Config is the operator's configuration.
type Config struct {
	EC2Endpoint string
	HTTPClient  *http.Client
	// QPS and Burst are --limit-ipam-api-qps and --limit-ipam-api-burst.
	QPS   float64
	Burst int
	// PreAllocate, MinAllocate and MaxAboveWatermark are the CiliumNode
	// spec's watermarks (spec.ipam.pre-allocate, …).
	PreAllocate       int
	MinAllocate       int
	MaxAboveWatermark int
	// PrefixDelegation is --aws-enable-prefix-delegation.
	PrefixDelegation bool
	// MaxENIs and IPv4PerENI are the instance type's limits.
	MaxENIs    int
	IPv4PerENI int
	// ResyncInterval and NodeUpdateRate are simulated.
	ResyncInterval time.Duration
	NodeUpdateRate time.Duration
	MaxAttempts    int
	// TimeScale divides every delay and multiplies the limiter's rate.
	TimeScale float64
	Logger    *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.QPS <= 0 {
		c.QPS = DefaultQPS
	}
	if c.Burst <= 0 {
		c.Burst = DefaultBurst
	}
	if c.PreAllocate <= 0 {
		c.PreAllocate = DefaultPreAllocate
	}
	if c.ResyncInterval <= 0 {
		c.ResyncInterval = DefaultResyncInterval
	}
	if c.NodeUpdateRate <= 0 {
		c.NodeUpdateRate = DefaultNodeUpdateRate
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.TimeScale <= 0 {
		c.TimeScale = 1
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	return c
}

// Operator is the cluster's one operator.
type Operator struct {
	cfg     Config
	log     *slog.Logger
	ec2     *ec2.Client
	limiter *rate.Limiter
	// calls counts EC2 operations the limiter has let through (the SDK's
	// retries of one operation are not counted again).
	calls atomic.Int64

	mu    sync.Mutex
	cache map[string][]*eni // instance ID -> attached ENIs, from EC2
	nodes map[string]*Node
	ready bool // the last resync succeeded

	resyncCh chan struct{}
	runCtx   context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// eni is one attached ENI as the operator's cache holds it.
type eni struct {
	id       string
	index    int
	subnetID string
	groups   []string
	addrs    []netip.Addr // secondary addresses, every address of each prefix
	prefixes int
}

// New starts the operator: its first resync, then the periodic one.
func New(ctx context.Context, cfg Config) (*Operator, error) {
	cfg = cfg.withDefaults()
	if cfg.EC2Endpoint == "" || cfg.MaxENIs < 1 || cfg.IPv4PerENI < 2 {
		return nil, errors.New("cilium operator: EC2 endpoint and the instance type's limits are required")
	}
	scale := cfg.TimeScale
	awsCfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDCILIUMOPERATOR", "cilium-secret", ""),
		HTTPClient:  sdkbody.Client{Next: cfg.HTTPClient},
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = cfg.MaxAttempts
				o.Backoff = scaledBackoff{inner: retry.NewExponentialJitterBackoff(retry.DefaultMaxBackoff), scale: scale}
			})
		},
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	o := &Operator{
		cfg: cfg, log: cfg.Logger.With("component", "cilium-operator"),
		ec2:      ec2.NewFromConfig(awsCfg, func(op *ec2.Options) { op.BaseEndpoint = aws.String(cfg.EC2Endpoint) }),
		limiter:  rate.NewLimiter(rate.Limit(cfg.QPS*scale), cfg.Burst),
		cache:    map[string][]*eni{},
		nodes:    map[string]*Node{},
		resyncCh: make(chan struct{}, 1),
		runCtx:   runCtx, cancel: cancel,
	}
	if _, err := o.resyncInstances(ctx); err != nil {
		cancel()
		return nil, err
	}
	o.wg.Go(o.resyncLoop)
	return o, nil
}

// Stop ends every loop.
func (o *Operator) Stop() {
	o.cancel()
	o.wg.Wait()
}

// Calls is how many EC2 operations went through the limiter.
func (o *Operator) Calls() int64 { return o.calls.Load() }

// limit waits for the limiter, as every call of Cilium's EC2 client does.
func (o *Operator) limit(ctx context.Context) error {
	if err := o.limiter.Wait(ctx); err != nil {
		return err
	}
	o.calls.Add(1)
	return nil
}

// wall turns a simulated duration into wall time.
func (o *Operator) wall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / o.cfg.TimeScale)
}

// triggerResync asks for a resync; triggers while one is pending fold.
func (o *Operator) triggerResync() {
	select {
	case o.resyncCh <- struct{}{}:
	default:
	}
}

// resyncLoop runs the resync when triggered and every ResyncInterval.
func (o *Operator) resyncLoop() {
	t := time.NewTicker(o.wall(o.cfg.ResyncInterval))
	defer t.Stop()
	for {
		select {
		case <-o.runCtx.Done():
			return
		case <-t.C:
		case <-o.resyncCh:
		}
		start, err := o.resyncInstances(o.runCtx)
		if err != nil {
			continue
		}
		o.resyncNodes(start)
	}
}

// resyncNodes is NodeManager.Resync: every node, most addresses needed
// first, forgets its resync wait if the resync started after it, is
// recalculated and, in deficit, gets its maintainer triggered.
func (o *Operator) resyncNodes(start time.Time) {
	o.mu.Lock()
	nodes := make([]*Node, 0, len(o.nodes))
	for _, n := range o.nodes {
		nodes = append(nodes, n)
	}
	o.mu.Unlock()
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].neededIPs() > nodes[j].neededIPs() })
	for _, n := range nodes {
		n.resynced(start)
	}
}

// scaledBackoff is the SDK's backoff with its delays divided by the time
// scale.
type scaledBackoff struct {
	inner retry.BackoffDelayer
	scale float64
}

func (b scaledBackoff) BackoffDelay(attempt int, err error) (time.Duration, error) {
	d, e := b.inner.BackoffDelay(attempt, err)
	return time.Duration(float64(d) / b.scale), e
}
