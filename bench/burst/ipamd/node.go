// Package ipamd is the burst benchmark's baseline: one node's aws-vpc-cni
// ipamd, reduced to what a scale-up burst exercises and calling the real
// EC2 API (awssim) through the real SDK with the SDK's standard retryer.
//
// What it models, from aws/amazon-vpc-cni-k8s (docs/benchmarks.md cites the
// lines):
//
//   - pkg/ipamd/ipamd.go StartNodeIPPoolManager: a loop every 5 s
//     (ipPoolMonitorInterval; it sleeps half, checks the pool, sleeps the
//     other half). isDatastorePoolTooLow: with WARM_ENI_TARGET=1 the pool is
//     low while fewer than one ENI's worth of addresses (maxIPsPerENI, the
//     type's IPv4 addresses per ENI minus the primary) are available; with
//     prefix delegation and WARM_PREFIX_TARGET=1, while fewer than 16.
//   - increaseDatastorePool: first tryAssignIPs / tryAssignPrefixes, one
//     AssignPrivateIpAddresses on the first ENI with room (all the room in
//     secondary-IP mode; max(1, WARM_PREFIX_TARGET - free prefixes)
//     prefixes in prefix mode; on failure once more for a single one);
//     only if that added nothing, tryAllocateENI: one new ENI per loop.
//   - pkg/awsutils/awsutils.go AllocENI: DescribeSubnets (subnet discovery,
//     on by default), CreateNetworkInterface with the addresses or
//     prefixes in the same call, DescribeInstances for a free device index,
//     AttachNetworkInterface, ModifyNetworkInterfaceAttribute
//     (DeleteOnTermination); a failed attach deletes the ENI, a failed
//     modify frees it (describe, detach, 2 s, delete). Then
//     WaitForENIAndIPsAttached polls IMDS with a 100 ms doubling backoff.
//   - An ADD with no free address fails at once; the CNI plugin returns the
//     error and kubelet retries the sandbox.
//
// Every EC2 call goes through the SDK's standard retryer (3 attempts,
// exponential jitter backoff up to 20 s, its retry token bucket), which is
// what ipamd's EC2 client gets from config.LoadDefaultConfig; the backoff
// delays are divided by the time scale. Every ipamd timer is scaled too.
package ipamd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/identity"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
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
	// are the manifest's defaults, 1 and 1.
	WarmENITarget    int
	WarmPrefixTarget int
	// MaxENIs and IPv4PerENI are the instance type's limits.
	MaxENIs    int
	IPv4PerENI int
	// MaxPods stops growth once the pool holds this many (eni-max-pods).
	MaxPods int
	// SubnetDiscovery calls DescribeSubnets before each create.
	SubnetDiscovery bool
	// MaxAttempts is the SDK retryer's attempts per call (default 3, what
	// config.LoadDefaultConfig gives).
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
		HTTPClient:  cfg.HTTPClient,
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
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

// Start is nodeInit: the node's identity from IMDS, one DescribeNetworkInterfaces
// of its attached ENIs (DescribeAllENIs), and the primary ENI in the
// datastore. The pool is filled by Run. A failed Start is a failed
// nodeInit: the real ipamd exits, and StartSupervised restarts it.
func (n *Node) Start(ctx context.Context) error {
	// A restarted ipamd rebuilds its datastore from nothing.
	n.ds.reset()
	id, err := identity.Fetch(ctx, n.imds)
	if err != nil {
		return fmt.Errorf("ipamd %s: identity: %w", n.cfg.InstanceID, err)
	}
	p, ok := id.Primary()
	if !ok {
		return fmt.Errorf("ipamd %s: no primary ENI in IMDS", n.cfg.InstanceID)
	}
	n.subnetID, n.vpcID, n.az, n.securityGroups = p.SubnetID, p.VPCID, id.AvailabilityZone, p.SecurityGroupIDs
	if _, err := n.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{
		Filters: []types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{n.cfg.InstanceID}}},
	}); err != nil {
		return fmt.Errorf("ipamd %s: describe ENIs: %w", n.cfg.InstanceID, err)
	}
	for _, m := range id.ENIs {
		n.ds.addENI(m.ENIID, m.DeviceNumber, m.MAC == id.PrimaryMAC)
		if len(m.IPv4s) > 1 {
			n.ds.addIPs(m.ENIID, m.IPv4s[1:])
		}
		n.ds.addPrefixes(m.ENIID, m.Prefixes)
	}
	return nil
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

func (n *Node) tooLow(s stats) bool {
	if n.cfg.MaxPods > 0 && s.total >= n.cfg.MaxPods {
		return false
	}
	if n.cfg.PrefixMode {
		return s.available() < allotv1.PrefixSize*n.cfg.WarmPrefixTarget || (n.cfg.WarmPrefixTarget == 0 && s.available() == 0)
	}
	return s.available() < n.maxIPsPerENI*n.cfg.WarmENITarget || (n.cfg.WarmENITarget == 0 && s.available() == 0)
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

func (n *Node) poolActionNow() {
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
