// Package burst is allot's burst benchmark, a scale-up burst across a fleet:
// N nodes, each running the real agent (agent/daemon with the kernel-free
// hostnettest.Recorder, its own checkpoint and its own awssim IMDS), talking
// over real gRPC on loopback to the real broker (server, leader engine and
// reconciler on embedded etcd), which talks to awssim through the real SDK
// with EC2's token buckets at a time scale. Warm targets are at their
// defaults; the nodes join; then P pods per node are requested at once
// through the agents' CNI Backend, each retried as kubelet retries a failed
// sandbox. The same burst is then run against a fresh awssim with every node
// calling EC2 itself the way aws-vpc-cni's ipamd does (package ipamd).
//
// Every variant reports its completion time next to the bucket model's lower
// bound for the fewest calls (lowerbound.LowerBound), time-to-address
// percentiles, throttling, calls by action against the planner's minimum,
// etcd writes per pod, and the CPU and memory of the broker and the agents.
// docs/benchmarks.md records a full run.
package burst

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"time"

	"github.com/allotnet/allot/agent/daemon"
)

// Spawner builds the command that runs this program in a child role
// ("broker" or "cloud") with the given arguments. The benchmark binary
// re-executes itself; nil runs every role in the harness's own process.
type Spawner func(role string, args []string) *exec.Cmd

// Config is the whole run; bench/cmd/allot-burst builds it from flags.
type Config struct {
	// Nodes is how many instances join (default 500).
	Nodes int
	// PodsPerNode is how many pods each node gets at once (default 46).
	PodsPerNode int
	// InstanceType is every node's type (default c5.xlarge).
	InstanceType string
	// TimeScale is simulated seconds per real second. Every EC2 bucket,
	// every agent and broker timer and kubelet's retry backoff run at it.
	// Zero picks it by mode: DefaultTimeScale with secondary IPs,
	// DefaultPrefixTimeScale with prefixes (see ScaleFor).
	TimeScale float64
	// Profiles are the arrival profiles to run (default: all at once).
	Profiles []Profile
	// Modes are the address modes to run (default both).
	Modes []daemon.Mode
	// Shares are the broker bucket shares to run (default 1 and 0.5).
	Shares []float64
	// TableErrors adds, per mode, an allot variant at share 1 for each
	// error of its bucket table (Variant.TableError).
	TableErrors []float64
	// Tenants adds, per mode and share, an allot variant with another
	// tool taking this fraction of every bucket (Variant.Tenant).
	Tenants []float64
	// AccountScale shrinks the simulated account: every EC2 bucket's size
	// and refill are this fraction of EC2's, and allot's broker is told so
	// (its bucket table scaled alike). Zero means 1. The quick run uses it
	// so that a small burst still drains the buckets.
	AccountScale float64
	// SharedDescribe and DiscreteRefill switch awssim's bucket model
	// (throttle.Semantics); the defaults are EC2's documented model.
	SharedDescribe bool
	DiscreteRefill bool
	// Baseline adds the ipamd baseline for every mode, at its defaults
	// and with each of IPAMDTuned's configurations for the mode.
	Baseline bool
	// IPAMDTuned lists, per mode, ipamd configurations to run besides the
	// defaults, each a comma-separated list of its settings
	// (ipamd.ParseTuning).
	IPAMDTuned map[daemon.Mode][]string
	// Cilium adds the Cilium operator model for every mode, at its defaults
	// and with each of CiliumTuned's configurations for the mode
	// (cilium.ParseTuning).
	Cilium      bool
	CiliumTuned map[daemon.Mode][]string
	// SubnetDiscovery makes the baseline call DescribeSubnets before each
	// CreateNetworkInterface, as ipamd does by default
	// (ENABLE_SUBNET_DISCOVERY=true).
	SubnetDiscovery bool
	// BaselineMaxAttempts is the baseline SDK retryer's attempts per call
	// (0: the SDK's default, 3).
	BaselineMaxAttempts int
	// Subnets is how many subnets (one /16 each, spread over three AZs,
	// as an EKS cluster's node subnets usually are) the nodes are spread
	// over, round-robin (default 3); more are used if the addresses need
	// them.
	Subnets int
	// JoinBatch is how many nodes join at a time (default 100); each batch
	// is warm before the next joins.
	JoinBatch int
	// WarmUntilFloor waits for the warm pools after the burst until two
	// simulated minutes past the later of the last pod and the floor of
	// the whole minimum (the top-ups' calls included: Result.WarmFloorSim),
	// instead of two minutes past the last pod. A burst that leaves
	// thousands of pools short needs that long for the calls alone.
	WarmUntilFloor bool
	// Deadline bounds each burst in simulated time (default 1h); pods not
	// placed by then are reported unplaced.
	Deadline time.Duration
	// WorkDir holds checkpoints and etcd data (default: a new temporary
	// directory, removed at the end).
	WorkDir string
	// EtcdFsync makes the broker's etcd fsync as in production.
	EtcdFsync bool
	// Spawn runs the broker and awssim as child processes, so their CPU
	// and memory are their own; nil runs them in this process.
	Spawn Spawner
	// SeparateEtcd, with Spawn, runs etcd in a child process of its own
	// and the broker against it (as allot-broker --etcd-endpoints does),
	// instead of the etcd the broker embeds, so the broker's memory and
	// etcd's are measured apart.
	SeparateEtcd bool
	// BrokerCPUProfile, with Spawn, makes each variant's broker write a
	// pprof CPU profile to this path plus the variant's index.
	BrokerCPUProfile string
	// BrokerRoundCPU makes each variant's broker read its planning rounds'
	// CPU time (executor.Config.RoundCPU), which the reports then give
	// beside the rounds' wall time; it costs the rounds wall time.
	BrokerRoundCPU bool
	// BrokerNice, with Spawn, is the nice value of every thread of the
	// broker's process (BrokerConfig.Nice): below 0 the kernel runs the
	// broker before the harness's agents and awssim when they contend for
	// a core, as on a cluster, where the agents run on nodes of their own
	// and EC2 elsewhere. 0 leaves the broker an equal share.
	BrokerNice int
	// CloudNice, with Spawn, is the nice value of awssim's process
	// (CloudConfig.Nice), which stands for EC2: on a cluster it does not
	// share a core with the agents either.
	CloudNice int
	// ChildStderr receives the children's logs (nil: discarded).
	ChildStderr io.Writer
	// Progress receives a line every few seconds while a burst runs (nil:
	// none).
	Progress io.Writer
	// Seed makes awssim's IDs and addresses reproducible.
	Seed int64
	// PlanPolicy is the broker's planner policy in every allot variant
	// (planner.Policy by name; empty: the broker's default).
	PlanPolicy string
	// ReleaseAfter is how long (simulated) a node's surplus lasts before
	// the broker releases it; 0 keeps the broker's default of two
	// minutes. Simulated time runs on the wall clock, so a run on a slow
	// machine lasts more simulated time, and past the default the surplus
	// the burst left is released inside the measured window; tests that
	// check a burst makes only the calls the broker planned set it long.
	ReleaseAfter time.Duration
	// MaxAgentCalls is the broker's bound on the agents' calls that read
	// or write etcd at once (allot-broker's --max-agent-calls); 0 keeps
	// its default, negative sets none.
	MaxAgentCalls int
	// PlanPolicies, when set, runs every allot variant once per policy
	// (its first for the table-error and other-tenant variants), so the
	// policies appear side by side.
	PlanPolicies []string
	// Ablation adds, per mode, allot at share 1 under the naive planner
	// policy (planner.Naive): allot's broker, agents and token buckets
	// with a planner a simple central allocator would have, to show what
	// the planner contributes. Not when PlanPolicies already name it.
	Ablation bool
	// NodeCounts, TimeScales and Seeds make a sweep: every variant is run
	// at every combination (Points). Empty means Nodes, TimeScale and Seed
	// alone.
	NodeCounts []int
	TimeScales []float64
	Seeds      []int64
	// IdleWindow, if set, is how long (simulated) the broker's etcd writes
	// are counted while every node is joined and warm and nothing else
	// happens, before the burst (Result.Idle).
	IdleWindow time.Duration
	// UpDown, if set, follows every allot burst with the way back down
	// and up again (runUpDown; secondary-IP mode only).
	UpDown *UpDown
	// OnResult, if set, receives each variant's result as soon as it is
	// known, failed or not.
	OnResult func(Result)
	Logger   *slog.Logger
}

// Point is one variant at one size, time scale and seed.
type Point struct {
	Variant Variant
	// Config is the run's, with Nodes, TimeScale (the variant's own, never
	// zero) and Seed set for this point.
	Config Config
}

// Points lists every burst of the run in order: for each node count, time
// scale and seed, the variants (Variants).
func (c Config) Points() []Point {
	nodes, scales, seeds := c.NodeCounts, c.TimeScales, c.Seeds
	if len(nodes) == 0 {
		nodes = []int{c.Nodes}
	}
	if len(scales) == 0 {
		scales = []float64{c.TimeScale}
	}
	if len(seeds) == 0 {
		seeds = []int64{c.Seed}
	}
	var out []Point
	for _, n := range nodes {
		for _, sc := range scales {
			for _, seed := range seeds {
				for _, v := range c.Variants() {
					pc := c
					pc.Nodes, pc.Seed, pc.TimeScale = n, seed, sc
					pc.TimeScale = pc.ScaleFor(v.Mode)
					out = append(out, Point{Variant: v, Config: pc})
				}
			}
		}
	}
	return out
}

func (c Config) accountScale() float64 {
	if c.AccountScale > 0 {
		return c.AccountScale
	}
	return 1
}

// bucketModel names awssim's bucket semantics for the report.
func (c Config) bucketModel() string {
	d, r := "per-api", "continuous"
	if c.SharedDescribe {
		d = "shared"
	}
	if c.DiscreteRefill {
		r = "discrete"
	}
	m := d + " describe, " + r + " refill"
	if a := c.accountScale(); a != 1 {
		m += fmt.Sprintf(", account at %g%% of EC2's buckets", 100*a)
	}
	return m
}

// emptyResult is a variant's result before anything is measured.
func (c Config) emptyResult(v Variant) Result {
	return Result{
		Variant: v.Name(), System: v.System, Mode: string(v.Mode), Share: v.Share, Profile: v.Profile.String(),
		TableError: v.TableError, Tenant: v.Tenant, Buckets: c.bucketModel(),
		Nodes: c.Nodes, PodsPerNode: c.PodsPerNode, Pods: c.Nodes * c.PodsPerNode,
		TimeScale: c.TimeScale, Seed: c.Seed, HotPathBrokerCalls: -1,
	}
}

// The quick run: the CI size. 40 nodes with 46 pods each against an
// account with a fifth of EC2's buckets: every mode drains them (allot's
// prefix burst needs one Assign per node, 40 against a bucket of 20), so
// every ratio is defined, and one variant takes well under a minute.
const (
	QuickNodes        = 40
	QuickAccountScale = 0.2
)

// Defaults of the full-size run.
const (
	DefaultNodes        = 500
	DefaultPodsPerNode  = 46
	DefaultInstanceType = "c5.xlarge"
	DefaultTimeScale    = 5
	// DefaultPrefixTimeScale is lower because the prefix floor is short
	// (80 s for the default burst): the harness needs about 1.5 s of wall
	// time to start 23,000 pods on two cores, which is 7.5 simulated
	// seconds at scale 5 and 3 at scale 2.
	DefaultPrefixTimeScale = 2
	DefaultDeadline        = time.Hour
	DefaultJoinBatch       = 100
	DefaultSubnets         = 3
)

// ScaleFor returns the time scale a variant of mode m runs at: TimeScale
// when set, else the mode's default.
func (c Config) ScaleFor(m daemon.Mode) float64 {
	switch {
	case c.TimeScale > 0:
		return c.TimeScale
	case m == daemon.ModePrefix:
		return DefaultPrefixTimeScale
	}
	return DefaultTimeScale
}

// WithDefaults fills the zero fields (TimeScale stays zero: ScaleFor picks
// it per variant).
func (c Config) WithDefaults() Config {
	if c.Nodes == 0 {
		c.Nodes = DefaultNodes
	}
	if c.PodsPerNode == 0 {
		c.PodsPerNode = DefaultPodsPerNode
	}
	if c.InstanceType == "" {
		c.InstanceType = DefaultInstanceType
	}
	if len(c.Modes) == 0 {
		c.Modes = []daemon.Mode{daemon.ModeSecondaryIP, daemon.ModePrefix}
	}
	if len(c.Shares) == 0 {
		c.Shares = []float64{1, 0.5}
	}
	if c.Deadline == 0 {
		c.Deadline = DefaultDeadline
	}
	if c.Subnets == 0 {
		c.Subnets = DefaultSubnets
	}
	if c.JoinBatch == 0 {
		c.JoinBatch = DefaultJoinBatch
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate refuses a run that can't mean anything.
func (c Config) Validate() error {
	switch {
	case c.Nodes < 1:
		return errors.New("nodes must be at least 1")
	case c.PodsPerNode < 1:
		return errors.New("pods per node must be at least 1")
	case c.TimeScale < 0:
		return errors.New("time scale must not be negative")
	case c.Deadline <= 0:
		return errors.New("deadline must be positive")
	case c.Subnets < 1:
		return errors.New("subnets must be at least 1")
	case c.JoinBatch < 1:
		return errors.New("join batch must be at least 1")
	case c.AccountScale < 0 || c.AccountScale > 1:
		return errors.New("account scale must be a fraction in (0, 1]")
	case c.SeparateEtcd && c.Spawn == nil:
		return errors.New("etcd apart from the broker needs child processes (Spawn)")
	}
	if c.UpDown != nil && slices.Contains(c.Modes, daemon.ModePrefix) {
		return errors.New("the way down and up again is measured in secondary-IP mode only")
	}
	for _, e := range c.TableErrors {
		if !(e > -1 && e != 0) {
			return fmt.Errorf("bucket table error %g: want a non-zero fraction above -1", e)
		}
	}
	for _, f := range c.Tenants {
		if !(f > 0 && f < 1) {
			return fmt.Errorf("other tenant %g: want a fraction in (0, 1)", f)
		}
	}
	for _, n := range c.NodeCounts {
		if n < 1 {
			return fmt.Errorf("node count %d: must be at least 1", n)
		}
	}
	for _, s := range c.TimeScales {
		if !(s > 0) {
			return fmt.Errorf("time scale %g: must be positive", s)
		}
	}
	for _, m := range c.Modes {
		if m != daemon.ModeSecondaryIP && m != daemon.ModePrefix {
			return fmt.Errorf("mode %q: want %q or %q", m, daemon.ModeSecondaryIP, daemon.ModePrefix)
		}
	}
	for _, s := range c.Shares {
		if !(s > 0 && s <= 1) {
			return fmt.Errorf("bucket share %g: want a fraction in (0, 1]", s)
		}
	}
	return nil
}

// wall converts a simulated duration to wall time at the run's scale.
func (c Config) wall(sim time.Duration) time.Duration {
	return time.Duration(float64(sim) / c.TimeScale)
}

// simOf converts a wall duration to simulated time.
func (c Config) simOf(wall time.Duration) time.Duration {
	return time.Duration(float64(wall) * c.TimeScale)
}
