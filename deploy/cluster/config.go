package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Address modes, as allot-agent's --mode takes them.
const (
	ModeSecondaryIP = "secondary-ip"
	ModePrefix      = "prefix"
)

// ReleaseMargin is how many free addresses beyond its warm targets a node
// may keep before the broker asks for some back (the broker engine's
// default; allot-broker has no flag for it). The leak check allows it.
const ReleaseMargin = 4

// Config is one cluster on this machine.
type Config struct {
	// Nodes is how many instances (and agents) to run; default 3.
	Nodes int
	// Brokers is how many allot-broker replicas to run, their embedded
	// etcd members forming one cluster; default 1. Two survive no failure
	// (both are needed for a quorum), so it is 1, 3 or 5.
	Brokers int
	// Partitionable routes each node's connections to the brokers through
	// a proxy of the harness's, so a test can cut them (Node.Partition).
	Partitionable bool
	// InstanceType of every node; default c5.xlarge (4 ENIs of 15
	// addresses).
	InstanceType string
	// TimeScale is simulated seconds per real second for awssim and the
	// broker (EC2's token buckets refill, detaches finish, IMDS catches up
	// and the broker's timers run that much faster); default 10.
	TimeScale float64
	// Mode is ModeSecondaryIP (default) or ModePrefix.
	Mode string
	// CustomNetworking runs the custom-networking layout: nodes in
	// 10.0.0.0/16, pods in two 100.64.0.0/16 subnets per zone, and a pod
	// network per zone set through the broker's API before the nodes join
	// (customnet.go).
	CustomNetworking bool
	// Warm are the agents' warm-pool targets; zero means aws-vpc-cni's
	// default (one warm ENI, or one warm prefix).
	Warm WarmTargets
	// Cooldown is how long a freed pod address rests before reuse; zero
	// means the agent's 30 s scaled by TimeScale, negative none.
	Cooldown time.Duration
	// Binaries are the programs to run (LocateBinaries or BuildBinaries).
	Binaries Binaries
	// Conflist is the CNI network configuration list the runtime uses
	// (deploy/cni/10-allot.conflist); each node's copy points at its
	// agent's socket and DEL queue.
	Conflist string
	// Stem starts the run's name ("allot-demo-"): every namespace and the
	// run directory. Crashed runs of the same stem are cleaned at Start.
	Stem string
	// Seed makes awssim's IDs and addresses reproducible; 0 picks one.
	Seed int64
	// ReadyTimeout bounds the start: agents ready and warm pools filled;
	// default 2 minutes.
	ReadyTimeout time.Duration
	// LogDir, if set, receives the broker's and agents' logs on Close;
	// otherwise they are removed with the run directory.
	LogDir string
	// Env is added to the environment of the broker and every agent (the
	// OpenTelemetry variables, say).
	Env []string
	// AgentArgs are added to every agent's command line after the
	// harness's own flags, so they win (--log-level=info, say).
	AgentArgs []string
	// Logger receives the harness's progress; nil discards it.
	Logger *slog.Logger
	// ComponentLogger receives awssim's and the data plane's logs; nil
	// discards them.
	ComponentLogger *slog.Logger
}

// WarmTargets are the agents' warm-pool targets, with aws-vpc-cni's
// meaning (WARM_IP_TARGET, MINIMUM_IP_TARGET, WARM_ENI_TARGET,
// WARM_PREFIX_TARGET).
type WarmTargets struct {
	WarmIPs, MinimumIPs, WarmENIs, WarmPrefixes int
}

func (c Config) withDefaults() (Config, error) {
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Brokers == 0 {
		c.Brokers = 1
	}
	if c.InstanceType == "" {
		c.InstanceType = "c5.xlarge"
	}
	if c.TimeScale == 0 {
		c.TimeScale = 10
	}
	if c.Mode == "" {
		c.Mode = ModeSecondaryIP
	}
	if c.Warm == (WarmTargets{}) {
		if c.Mode == ModePrefix {
			c.Warm.WarmPrefixes = 1
		} else {
			c.Warm.WarmENIs = 1
		}
	}
	if c.Cooldown == 0 {
		c.Cooldown = time.Duration(float64(30*time.Second) / c.TimeScale)
	}
	if c.Stem == "" {
		c.Stem = "allot-demo-"
	}
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano()
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 2 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ComponentLogger == nil {
		c.ComponentLogger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.Nodes < 1 || c.Nodes > 200:
		return c, fmt.Errorf("nodes %d: want 1 to 200", c.Nodes)
	case c.Brokers != 1 && c.Brokers != 3 && c.Brokers != 5:
		return c, fmt.Errorf("brokers %d: want 1, 3 or 5", c.Brokers)
	case c.TimeScale <= 0:
		return c, fmt.Errorf("time scale %g: want a positive number", c.TimeScale)
	case c.Mode != ModeSecondaryIP && c.Mode != ModePrefix:
		return c, fmt.Errorf("mode %q: want %q or %q", c.Mode, ModeSecondaryIP, ModePrefix)
	case c.Binaries.Plugin == "" || c.Binaries.Agent == "" || c.Binaries.Broker == "" || c.Binaries.Ctl == "":
		return c, errors.New("binaries are not set: use LocateBinaries or BuildBinaries")
	case c.Conflist == "":
		return c, errors.New("conflist path is required (deploy/cni/10-allot.conflist)")
	}
	if _, err := os.Stat(c.Conflist); err != nil {
		return c, fmt.Errorf("conflist: %w", err)
	}
	if os.Geteuid() != 0 {
		return c, errors.New("a cluster needs root: it creates network namespaces, links and nftables rules")
	}
	return c, nil
}

// keepFree is how many free addresses a node's warm targets ask to keep
// with no pod running, with aws-vpc-cni's precedence: WARM_IP_TARGET and
// MINIMUM_IP_TARGET win over WARM_ENI_TARGET; WARM_PREFIX_TARGET counts
// whole prefixes. ipv4PerENI is the type's addresses per ENI, primary
// included.
func (w WarmTargets) keepFree(mode string, ipv4PerENI int) int {
	k := max(w.WarmIPs, w.MinimumIPs, 0)
	ipTargets := w.WarmIPs > 0 || w.MinimumIPs > 0
	if mode == ModePrefix {
		if w.WarmPrefixes > 0 {
			k = max(k, w.WarmPrefixes*allotv1.PrefixSize)
		}
		return k
	}
	if !ipTargets && w.WarmENIs > 0 {
		k = w.WarmENIs * (ipv4PerENI - 1)
	}
	return k
}

// allowedIdle is the most addresses, and ENIs, a node with no pods may hold
// once the broker has taken back its surplus: the warm target plus the
// release margin (in prefix mode, less than one more whole prefix, since
// only whole prefixes go back; under a warm ENI target, less than one more
// ENI's worth, since the agent counts its excess in whole ENIs' worth).
func (w WarmTargets) allowedIdle(mode string, ipv4PerENI int) (addrs, enis int) {
	keep := w.keepFree(mode, ipv4PerENI)
	slotsPerENI := max(ipv4PerENI-1, 1)
	if mode == ModePrefix {
		addrs = keep + max(ReleaseMargin, allotv1.PrefixSize-1)
		slots := addrs / allotv1.PrefixSize
		return slots * allotv1.PrefixSize, max(1, ceilDiv(slots, slotsPerENI))
	}
	addrs = keep + ReleaseMargin
	if w.WarmENIs > 0 && w.WarmIPs == 0 && w.MinimumIPs == 0 {
		// Nothing goes back short of an ENI's worth, and an ENI keeps
		// its addresses until it can go whole: what stays may sit on
		// one ENI more than it fills.
		addrs = keep + max(ReleaseMargin, slotsPerENI-1)
		return addrs, ceilDiv(addrs, slotsPerENI) + 1
	}
	return addrs, max(1, ceilDiv(addrs, slotsPerENI))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
