package daemon

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/allotnet/allot/agent/pool"
)

// Mode is how the node's pods get addresses.
type Mode string

// Address modes.
const (
	// ModeSecondaryIP gives each pod one secondary IPv4 address of an ENI.
	ModeSecondaryIP Mode = "secondary-ip"
	// ModePrefix gives pods addresses out of /28 prefixes delegated to the
	// node's ENIs (Nitro instance types only).
	ModePrefix Mode = "prefix"
)

// Defaults for the Config fields left zero.
const (
	// DefaultMaxAddWait bounds how long an ADD that finds the pool empty
	// waits for capacity on its way before answering "try again later".
	// Failing early gains nothing: the runtime tears the sandbox down and
	// kubelet requeues the pod only after 10 to 15 s of back-off, and
	// capacity that arrives meanwhile waits unused, so an ADD waits as long
	// as it safely can: 5 s under the plugin's own ADD timeout (105 s), so
	// the runtime gets the pod or the typed error rather than a timeout,
	// which in turn leaves kubelet's runtime request timeout (2 min) room
	// for the failed sandbox's teardown (cni/plugin's config.go has the
	// whole chain).
	DefaultMaxAddWait = 100 * time.Second
	// DefaultDelQueueInterval is how often the plugin's DEL queue is
	// replayed after start.
	DefaultDelQueueInterval = time.Minute
)

// Config is everything the agent is told; main builds it from flags. The
// IMDS endpoint and broker address are not here: they are how the IMDS and
// broker dependencies (Deps) were built.
type Config struct {
	// Mode is secondary-ip (default) or prefix.
	Mode Mode
	// Warm holds the warm-pool targets, with aws-vpc-cni's meaning of
	// WARM_IP_TARGET, MINIMUM_IP_TARGET, WARM_ENI_TARGET, WARM_PREFIX_TARGET
	// and MAX_ENI. When none of the four warm fields is set, aws-vpc-cni's
	// defaults apply (one warm ENI, or one warm prefix). PrefixMode is set
	// from Mode.
	Warm pool.Targets
	// Limits overrides the instance type's ENI limits. Zero means what the
	// broker reports (it reads them from EC2 with DescribeInstanceTypes);
	// until it does, the pool asks for no warm addresses, only for pods
	// waiting.
	Limits pool.Limits
	// Cooldown is how long a freed address rests before reuse; 0 means
	// 30 s (pool.DefaultCooldown), negative means none.
	Cooldown time.Duration
	// MaxAddWait bounds how long an ADD waits on an empty pool; 0 means
	// DefaultMaxAddWait.
	MaxAddWait time.Duration
	// RetryLinger is how long an ADD that gave up waiting still counts in
	// the demand (its pod is retried by kubelet); 0 means
	// pool.DefaultRetryLinger, negative none.
	RetryLinger time.Duration
	// CheckpointPath is the allocation checkpoint file. Required.
	CheckpointPath string
	// SocketPath is the CNI unix socket; empty serves no socket (the
	// benchmark calls the Backend methods directly).
	SocketPath string
	// IntrospectAddr is the localhost address of /v1/enis, /v1/pods,
	// /healthz and /metrics; empty serves none.
	IntrospectAddr string
	// RepairTokenPath is the root-only file holding the token that POST
	// /v1/repair requires (created when missing); empty turns repair off.
	RepairTokenPath string
	// MetricsAddr serves /metrics and /healthz alone, read-only, for
	// Prometheus elsewhere in the cluster: it may be the node's IP (a
	// hostNetwork agent) or 0.0.0.0. Empty serves none.
	MetricsAddr string
	// DelQueueDir is where the plugin queues DELs while the agent is down;
	// empty skips the replay.
	DelQueueDir string
	// DelQueueInterval is how often the queue is replayed after start; 0
	// means DefaultDelQueueInterval.
	DelQueueInterval time.Duration
	// ExternalSNAT leaves translation of traffic leaving the VPC to an
	// external NAT (a NAT gateway); the node does no SNAT.
	ExternalSNAT bool
	// SNATExcludeCIDRs are destinations outside the VPC that pods reach
	// with their own address (peered VPCs, on-premises networks).
	SNATExcludeCIDRs []netip.Prefix
	// MTU, when non-zero, is set on ENI links and pod veths.
	MTU int
	// UsageInterval batches usage reports to the broker; 0 means the
	// brokerlink default.
	UsageInterval time.Duration
	// HeartbeatInterval keeps the node's liveness lease; 0 means the
	// brokerlink default.
	HeartbeatInterval time.Duration
	// DemandInterval coalesces demand statements to the broker: the first
	// change after a quiet interval is sent at once, later ones at the
	// interval's end. 0 means the brokerlink default (100 ms); negative
	// sends every change.
	DemandInterval time.Duration
	// ConfirmInterval is how often IMDS is polled for an ENI new to the
	// agent that it doesn't show yet, four times as often in the first ten
	// intervals; 0 means DefaultConfirmInterval.
	ConfirmInterval time.Duration
	// IMDSCheckAfter is how long after delivered addresses joined the pool
	// the agent asks IMDS whether it shows them (a check that logs and
	// counts a disagreement with the broker's record; it gates nothing).
	// 0 means DefaultIMDSCheckAfter; negative turns the check off.
	IMDSCheckAfter time.Duration
	// NodeName is the Kubernetes node name, registered with the broker so
	// operators see it beside the instance ID; empty outside Kubernetes.
	NodeName string
}

// withDefaults fills zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Mode == "" {
		c.Mode = ModeSecondaryIP
	}
	if c.Mode != ModeSecondaryIP && c.Mode != ModePrefix {
		return c, fmt.Errorf("address mode %q: want %q or %q", c.Mode, ModeSecondaryIP, ModePrefix)
	}
	c.Warm.PrefixMode = c.Mode == ModePrefix
	if w := c.Warm; w.WarmIPs == 0 && w.MinimumIPs == 0 && w.WarmENIs == 0 && w.WarmPrefixes == 0 {
		d := pool.DefaultTargets(w.PrefixMode)
		c.Warm.WarmENIs, c.Warm.WarmPrefixes = d.WarmENIs, d.WarmPrefixes
	}
	if err := c.Warm.Validate(); err != nil {
		return c, fmt.Errorf("warm targets: %w", err)
	}
	if c.Cooldown == 0 {
		c.Cooldown = pool.DefaultCooldown
	}
	if c.MaxAddWait == 0 {
		c.MaxAddWait = DefaultMaxAddWait
	}
	if c.MaxAddWait < 0 {
		return c, fmt.Errorf("max add wait %v must not be negative", c.MaxAddWait)
	}
	if c.DelQueueInterval <= 0 {
		c.DelQueueInterval = DefaultDelQueueInterval
	}
	if c.CheckpointPath == "" {
		return c, errors.New("checkpoint path is required")
	}
	for name, p := range map[string]string{"checkpoint path": c.CheckpointPath, "socket path": c.SocketPath, "del queue dir": c.DelQueueDir} {
		if p != "" && !filepath.IsAbs(p) {
			return c, fmt.Errorf("%s %q must be absolute", name, p)
		}
	}
	for _, p := range c.SNATExcludeCIDRs {
		if !p.IsValid() || !p.Addr().Is4() {
			return c, fmt.Errorf("SNAT exclude CIDR %v must be an IPv4 CIDR", p)
		}
	}
	if c.Limits.MaxENIs < 0 || c.Limits.IPv4PerENI < 0 {
		return c, fmt.Errorf("instance limits %+v must not be negative", c.Limits)
	}
	return c, nil
}
