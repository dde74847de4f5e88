// Package ipamd is the burst benchmark's baseline: one node's aws-vpc-cni
// ipamd, reduced to what a scale-up burst exercises and calling the real
// EC2 API (awssim) through the real SDK.
//
// It follows aws/amazon-vpc-cni-k8s at v1.23.1 (commit b52188387f2e,
// "Prepare v1.23.1 release"); docs/benchmarks.md lists what is modelled
// and what is left out:
//
//   - pkg/ipamd/ipamd.go nodeInit (Start): DescribeAllENIs (one
//     DescribeNetworkInterfaces of the attached ENIs, retried up to 12
//     times), TagENI (CreateTags of the primary ENI's missing tags),
//     setupENI of the primary ENI (with subnet discovery, IsSubnetExcluded:
//     a DescribeSubnets of the VPC and zone, retried 5 times 10 s apart),
//     RefreshSGIDs (ModifyNetworkInterfaceAttribute with the security groups
//     of every ENI, since a fresh process has none cached) and
//     handlePreScaling (the first increaseDatastorePool; its failure fails
//     nodeInit, and the process exits).
//   - StartNodeIPPoolManager: a loop every 5 s (ipPoolMonitorInterval; it
//     sleeps half, checks the pool, sleeps the other half).
//     isDatastorePoolTooLow with WARM_ENI_TARGET / WARM_PREFIX_TARGET, or
//     with WARM_IP_TARGET / MINIMUM_IP_TARGET when either is set
//     (datastoreTargetState).
//   - increaseDatastorePool: first tryAssignIPs / tryAssignPrefixes, one
//     AssignPrivateIpAddresses on the first ENI with room (all its room in
//     secondary-IP mode, or the shortfall of WARM_IP_TARGET /
//     MINIMUM_IP_TARGET; getPrefixesNeeded prefixes in prefix mode; on
//     failure once more for a single one); only if that added nothing,
//     tryAllocateENI: one new ENI per loop with GetENIResourcesToAllocate
//     addresses or prefixes.
//   - pkg/awsutils/awsutils.go AllocENI: createENI (DescribeSubnets for
//     subnet discovery; on failure a second one from IsSubnetExcluded, and
//     when that fails too the creation is abandoned),
//     CreateNetworkInterface with the addresses or prefixes in the same
//     call, DescribeInstances for a free device index,
//     AttachNetworkInterface, ModifyNetworkInterfaceAttribute
//     (DeleteOnTermination); a failed attach deletes the ENI, a failed
//     modify frees it (describe, detach, 2 s, delete). Then
//     WaitForENIAndIPsAttached polls IMDS with a 100 ms doubling backoff,
//     and setupENI adds the ENI and, with subnet discovery, lists the
//     subnets again (IsSubnetExcluded, uncached) before it adds the
//     addresses: two DescribeSubnets per new ENI.
//   - An ADD with no free address fails at once; the CNI plugin returns the
//     error and kubelet retries the sandbox.
//
// Every EC2 call goes through the SDK's standard retryer with 10 attempts
// (pkg/awsutils/awssession: config.WithRetryMaxAttempts(maxRetries = 10),
// retry.NewStandard(): exponential jitter backoff up to 20 s and the
// retryer's token bucket); the backoff delays are divided by the time
// scale, as is every ipamd timer.
package ipamd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/identity"
	"github.com/allotnet/allot/internal/sdkbody"
)

// ipamd's constants (pkg/ipamd/ipamd.go, pkg/awsutils/awsutils.go).
const (
	poolMonitorInterval = 5 * time.Second
	// maxENIEC2APIRetries and maxENIBackoffDelay bound awsutils' own retry
	// loops (deleteENI, detach, waitForENIAndIPsAttached).
	maxENIEC2APIRetries = 12
	maxENIBackoffDelay  = time.Minute
	// sleepAfterDetach is freeENI's wait before the delete.
	sleepAfterDetach = 2 * time.Second
	// maxRetryCheckENI and eniAttachTime bound nodeInit's retries of
	// setupENI.
	maxRetryCheckENI = 5
	eniAttachTime    = 10 * time.Second
	// DefaultMaxAttempts is the SDK attempts per EC2 call
	// (pkg/awsutils/awssession maxRetries).
	DefaultMaxAttempts = 10
	// eniNodeTagKey is the tag TagENI and createENI put on every ENI.
	eniNodeTagKey = "node.k8s.amazonaws.com/instance_id"
)

// Config is one node's ipamd.
type Config struct {
	InstanceID   string
	IMDSEndpoint string
	EC2Endpoint  string
	// HTTPClient carries the node's EC2 requests; nodes may share one
	// transport so a large run doesn't exhaust loopback ports.
	HTTPClient *http.Client
	PrefixMode bool
	// WarmENITarget (secondary-IP mode) and WarmPrefixTarget (prefix mode)
	// are the manifest's defaults, 1 and 1. WarmIPTarget and
	// MinimumIPTarget (0: unset) take precedence over both when set.
	WarmENITarget    int
	WarmPrefixTarget int
	WarmIPTarget     int
	MinimumIPTarget  int
	// MaxENIs and IPv4PerENI are the instance type's limits.
	MaxENIs    int
	IPv4PerENI int
	// MaxPods stops growth once the pool holds this many (eni-max-pods).
	MaxPods int
	// SubnetDiscovery is ENABLE_SUBNET_DISCOVERY (on by default): subnets
	// are listed to create an ENI and again to set it up.
	SubnetDiscovery bool
	// MaxAttempts is the SDK retryer's attempts per call (default 10, what
	// ipamd's awssession configures).
	MaxAttempts int
	// TimeScale divides every delay.
	TimeScale float64
	Logger    *slog.Logger
}

// Node is one node's ipamd.
type Node struct {
	cfg  Config
	log  *slog.Logger
	ec2  *ec2.Client
	imds identity.MetadataAPI
	ds   *datastore

	subnetID, vpcID, az string
	securityGroups      []string
	maxIPsPerENI        int // secondary addresses, or prefixes, per ENI

	// errs counts failed pool actions by where they failed; lastAction is
	// when the pool last grew (wall clock); both under ds.mu.
	errs       map[string]int
	lastAction time.Time
	// actions counts the pool increases that added addresses or an ENI.
	actions atomic.Int64
}

// New builds the node's SDK and IMDS clients.
func New(cfg Config) (*Node, error) {
	if cfg.InstanceID == "" || cfg.IMDSEndpoint == "" || cfg.EC2Endpoint == "" {
		return nil, errors.New("ipamd: instance id, IMDS and EC2 endpoints are required")
	}
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	im, err := identity.NewClient(cfg.IMDSEndpoint)
	if err != nil {
		return nil, err
	}
	scale := cfg.TimeScale
	awsCfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDIPAMDBASELINE", "ipamd-secret", ""),
		HTTPClient:  sdkbody.Client{Next: cfg.HTTPClient},
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = DefaultMaxAttempts
				if cfg.MaxAttempts > 0 {
					o.MaxAttempts = cfg.MaxAttempts
				}
				o.Backoff = scaledBackoff{inner: retry.NewExponentialJitterBackoff(retry.DefaultMaxBackoff), scale: scale}
			})
		},
	}
	client := ec2.NewFromConfig(awsCfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(cfg.EC2Endpoint) })
	return &Node{
		cfg: cfg, log: cfg.Logger.With("component", "ipamd", "instance", cfg.InstanceID),
		ec2: client, imds: im, ds: newDatastore(), errs: map[string]int{},
		maxIPsPerENI: cfg.IPv4PerENI - 1,
	}, nil
}

// scaledBackoff is the SDK's backoff with its delays divided by the time
// scale, so a retry waits the same simulated time it would on EC2.
type scaledBackoff struct {
	inner retry.BackoffDelayer
	scale float64
}

func (b scaledBackoff) BackoffDelay(attempt int, err error) (time.Duration, error) {
	d, e := b.inner.BackoffDelay(attempt, err)
	return time.Duration(float64(d) / b.scale), e
}

// wall turns a simulated duration into wall time.
func (n *Node) wall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / n.cfg.TimeScale)
}

func (n *Node) sleep(ctx context.Context, sim time.Duration) error {
	t := time.NewTimer(n.wall(sim))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Run is StartNodeIPPoolManager until ctx ends.
func (n *Node) Run(ctx context.Context) {
	half := poolMonitorInterval / 2
	for {
		if n.sleep(ctx, half) != nil {
			return
		}
		n.updateIPPoolIfRequired(ctx)
		if n.sleep(ctx, half) != nil {
			return
		}
		if err := n.nodeIPPoolReconcile(ctx); err != nil && ctx.Err() == nil {
			n.countErr("reconcile")
		}
	}
}

// String describes the node's datastore for diagnostics.
func (n *Node) String() string {
	return fmt.Sprintf("%s: datastore %+v, errors %v", n.cfg.InstanceID, n.ds.stats(), n.Errors())
}

// Low reports isDatastorePoolTooLow.
func (n *Node) Low() bool { return n.tooLow(n.ds.stats()) }

// Settled reports that the pool manager has nothing left to do: the pool
// is not low, or it is and no ENI has room and no ENI can be added.
func (n *Node) Settled() bool {
	s := n.ds.stats()
	if !n.tooLow(s) {
		return true
	}
	return s.enis >= n.cfg.MaxENIs && len(n.ds.allocatable(n.maxIPsPerENI, n.cfg.PrefixMode)) == 0
}

func (n *Node) updateIPPoolIfRequired(ctx context.Context) {
	if n.Low() {
		if err := n.increaseDatastorePool(ctx); err != nil && ctx.Err() == nil {
			n.log.Debug("increase pool", "err", err)
		}
	}
}

// Add is the ADD ipamd answers over its gRPC socket: a free address from
// the datastore, or an error at once.
func (n *Node) Add(_ context.Context, req cniserver.Request) (cniserver.AddResult, error) {
	a, eniID, err := n.ds.assign(req.Attachment)
	if err != nil {
		return cniserver.AddResult{}, fmt.Errorf("%w: %w", cniserver.ErrPoolEmpty, err)
	}
	return cniserver.AddResult{Address: netip.PrefixFrom(a, 32), ENIID: eniID}, nil
}

// Del frees the attachment's address, if it has one.
func (n *Node) Del(_ context.Context, req cniserver.Request) error {
	n.ds.release(req.Attachment)
	return nil
}

// Errors returns the failed pool actions by kind.
func (n *Node) Errors() map[string]int {
	n.ds.mu.Lock()
	defer n.ds.mu.Unlock()
	out := map[string]int{}
	for k, v := range n.errs {
		out[k] = v
	}
	return out
}

// PoolActions is how many times the pool manager has grown the pool.
func (n *Node) PoolActions() int64 { return n.actions.Load() }

func (n *Node) poolActionNow() {
	n.actions.Add(1)
	n.ds.mu.Lock()
	n.lastAction = time.Now()
	n.ds.mu.Unlock()
}

func (n *Node) sinceAction() time.Duration {
	n.ds.mu.Lock()
	defer n.ds.mu.Unlock()
	return time.Since(n.lastAction)
}

func (n *Node) countErr(kind string) {
	n.ds.mu.Lock()
	n.errs[kind]++
	n.ds.mu.Unlock()
}
