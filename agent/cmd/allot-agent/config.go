package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/allotnet/allot/agent/brokerlink"
	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/agent/pool"
	"github.com/allotnet/allot/cni/plugin"
	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/logfmt"
	"github.com/allotnet/allot/internal/telemetry/traceconf"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// config is everything the agent is told on its command line; main builds
// it and passes it down, nothing below reads flags or the environment.
type config struct {
	agent daemon.Config

	imdsEndpoint string
	brokers      []string
	// Broker TLS: a CA makes it TLS; a certificate makes it mutual.
	brokerCA         string
	brokerCert       string
	brokerKey        string
	brokerServerName string
	// nodeKey is the node's attestation key (agent/attest), used when the
	// broker is reached over TLS without a client certificate.
	nodeKey string

	nodeNetNS string
	procSys   string
	// memoryLimitMiB is the Go runtime's soft memory limit (memory.go).
	memoryLimitMiB int
	// gcPercent is the garbage collector's GOGC (memory.go).
	gcPercent int
	log       logfmt.Options
	// trace is read from the OpenTelemetry environment.
	trace traceconf.TraceConfig
}

// parseFlags builds the config from args and the environment variables
// aws-node takes (env.go); a flag on the command line wins.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	return parseFlagsEnv(args, stderr, os.LookupEnv)
}

func parseFlagsEnv(args []string, stderr io.Writer, lookup func(string) (string, bool)) (config, error) {
	var c config
	fs := flag.NewFlagSet("allot-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	raw := rawFlags{brokers: brokerFlags(fs, &c), mode: poolFlags(fs, &c.agent), exclude: hostFlags(fs, &c)}
	logFlags := logfmt.Register(fs, "info")
	buildinfo.Flag(fs)
	if err := applyEnv(fs, lookup); err != nil {
		return c, err
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if err := c.finish(raw); err != nil {
		return c, err
	}
	var err error
	if c.log, err = logFlags.Parse(); err != nil {
		return c, err
	}
	if c.trace, err = traceconf.TraceConfigFromEnv(lookup, "allot-agent"); err != nil {
		return c, err
	}
	return c, nil
}

// rawFlags are flag values that need parsing once the flags are read.
type rawFlags struct {
	brokers, mode, exclude *string
}

// brokerFlags registers how to reach the broker and IMDS.
func brokerFlags(fs *flag.FlagSet, c *config) (brokers *string) {
	fs.StringVar(&c.imdsEndpoint, "imds-endpoint", "",
		"instance metadata endpoint; REQUIRED, no default so a test can never read a real instance's identity. "+
			"On EC2 it is http://169.254.169.254")
	brokers = fs.String("broker", "", "REQUIRED: comma-separated broker addresses (host:port); the agent uses whichever answers")
	fs.StringVar(&c.brokerCA, "broker-ca", "", "CA bundle to verify the broker's certificate (plaintext if empty)")
	fs.StringVar(&c.brokerCert, "broker-cert", "", "client certificate for mutual TLS with the broker")
	fs.StringVar(&c.brokerKey, "broker-key", "", "client key for mutual TLS with the broker")
	fs.StringVar(&c.brokerServerName, "broker-server-name", "", "name to verify in the broker's certificate (default: the host of the address)")
	fs.StringVar(&c.nodeKey, "node-key", "/var/lib/allot/node.key", "the node's attestation key, created on first start; over TLS without --broker-cert "+
		"the agent proves its instance with it and the identity document IMDS signs (keep it on the host: the broker binds the instance to it)")
	a := &c.agent
	fs.DurationVar(&a.UsageInterval, "usage-interval", 0, "batch usage reports to the broker at most this often (0: 1s)")
	fs.DurationVar(&a.HeartbeatInterval, "heartbeat-interval", 0, "liveness heartbeat to the broker (0: 10s)")
	fs.DurationVar(&a.DemandInterval, "demand-interval", brokerlink.DefaultDemandInterval,
		"coalesce demand updates to the broker: the first change goes at once, later ones within this interval "+
			"together at its end (0: every change at once)")
	fs.DurationVar(&a.IMDSCheckAfter, "imds-check-after", daemon.DefaultIMDSCheckAfter,
		"how long after the broker's delivered addresses joined the pool IMDS is asked whether it shows them "+
			"(a disagreement is logged and counted in allot.agent.imds.disagreements; it gates nothing; 0: no check)")
	return brokers
}

// poolFlags registers the warm pool's targets, limits and waits.
func poolFlags(fs *flag.FlagSet, a *daemon.Config) (mode *string) {
	mode = fs.String("mode", string(daemon.ModeSecondaryIP), "address mode: secondary-ip or prefix (/28 prefixes, Nitro only)")
	fs.IntVar(&a.Warm.WarmIPs, "warm-ip-target", 0, "WARM_IP_TARGET: free addresses to keep (overrides ENI/prefix targets)")
	fs.IntVar(&a.Warm.MinimumIPs, "minimum-ip-target", 0, "MINIMUM_IP_TARGET: addresses to hold at least")
	fs.IntVar(&a.Warm.WarmENIs, "warm-eni-target", 0, "WARM_ENI_TARGET: ENIs' worth of free addresses (secondary-ip; default 1 when no target is set)")
	fs.IntVar(&a.Warm.WarmPrefixes, "warm-prefix-target", 0, "WARM_PREFIX_TARGET: free /28 prefixes (prefix mode; default 1 when no target is set)")
	fs.IntVar(&a.Warm.MaxENIs, "max-enis", 0, "MAX_ENI: cap on ENIs below the instance type's limit (0: the type's)")
	fs.IntVar(&a.Warm.MaxPods, "max-pods", 0, "stop growing the pool once it holds this many addresses (0: no cap)")
	fs.IntVar(&a.Limits.MaxENIs, "instance-max-enis", 0, "override the instance type's ENI limit (0: as the broker reads it from EC2)")
	fs.IntVar(&a.Limits.IPv4PerENI, "instance-ipv4-per-eni", 0, "override the instance type's IPv4 addresses per ENI, primary included")

	fs.DurationVar(&a.Cooldown, "cooldown", pool.DefaultCooldown, "how long a freed pod address rests before reuse")
	fs.DurationVar(&a.MaxAddWait, "max-add-wait", daemon.DefaultMaxAddWait,
		"how long an ADD waits on an empty pool for capacity on its way before answering try-again-later "+
			"(at most "+(plugin.DefaultTimeout-plugin.AgentMargin).String()+", 5s under the plugin's ADD timeout; an early failure costs the pod kubelet's 10-15s back-off)")
	fs.DurationVar(&a.RetryLinger, "retry-linger", pool.DefaultRetryLinger,
		"how long an ADD that gave up waiting still counts in the node's demand: kubelet retries its pod 10-15s later")
	fs.StringVar(&a.CheckpointPath, "checkpoint", "/var/lib/allot/checkpoint.json", "allocation checkpoint file")
	return mode
}

// hostFlags registers the node's sockets, endpoints and host network.
func hostFlags(fs *flag.FlagSet, c *config) (exclude *string) {
	a := &c.agent
	fs.StringVar(&a.SocketPath, "socket", plugin.DefaultAgentSocket, "CNI unix socket (mode 0600)")
	fs.StringVar(&a.IntrospectAddr, "introspect-addr", "127.0.0.1:61679", "loopback address of /v1/enis, /v1/pods, /healthz, /metrics (empty: off)")
	fs.StringVar(&a.RepairTokenPath, "repair-token-file", "",
		"root-only file with the token POST /v1/repair needs (allotctl check --repair), created when missing "+
			"(default: repair-token beside the checkpoint; none: repair off)")
	fs.StringVar(&a.MetricsAddr, "metrics-addr", "", "address serving /metrics and /healthz alone, read-only, for Prometheus "+
		"in the cluster: the node's IP (e.g. $(NODE_IP):61678) or 0.0.0.0:61678 (empty: off)")
	fs.StringVar(&a.DelQueueDir, "del-queue-dir", plugin.DefaultDelQueueDir, "directory where the plugin queues DELs while the agent is down (empty: no replay)")
	fs.DurationVar(&a.DelQueueInterval, "del-queue-interval", daemon.DefaultDelQueueInterval, "how often the DEL queue is replayed after start")
	fs.BoolVar(&a.ExternalSNAT, "external-snat", false, "leave SNAT of traffic leaving the VPC to an external NAT (AWS_VPC_K8S_CNI_EXTERNALSNAT)")
	exclude = fs.String("snat-exclude-cidrs", "", "comma-separated CIDRs outside the VPC that pods reach without SNAT")
	fs.IntVar(&a.MTU, "mtu", 0, "MTU of ENI links and pod veths (0: leave as is)")
	fs.StringVar(&c.nodeNetNS, "node-netns", "", "network namespace path of the node (empty: the agent's own)")
	fs.StringVar(&c.procSys, "proc-sys", "/proc/sys", "where /proc/sys is writable (in a container: the host's /proc/sys/net mounted under <dir>/net)")
	fs.IntVar(&c.memoryLimitMiB, "memory-limit-mib", defaultMemoryLimitMiB, "soft limit, in MiB, on the memory the Go runtime "+
		"holds (heap, goroutine stacks, its own): near it the garbage collector runs sooner and hands freed memory back to the "+
		"kernel at once, rather than keeping the peak of a burst (0: no limit; GOMEMLIMIT, when set, wins)")
	fs.IntVar(&c.gcPercent, "gc-percent", defaultGCPercent, "how far, in percent of the live heap, the heap grows before the "+
		"garbage collector runs again; lower keeps less memory for more GC CPU (GOGC, when set, wins; -1: off)")
	fs.StringVar(&c.agent.NodeName, "node-name", "", "Kubernetes node name, from the downward API (spec.nodeName); registered with the broker, shown by allotctl and in logs beside the instance ID")
	return exclude
}

// finish checks what the flags say together and fills what needs parsing.
func (c *config) finish(raw rawFlags) error {
	a := &c.agent
	if c.imdsEndpoint == "" {
		return errors.New("--imds-endpoint is required (on EC2: http://169.254.169.254)")
	}
	c.brokers = splitList(*raw.brokers)
	if len(c.brokers) == 0 {
		return errors.New("--broker is required")
	}
	a.Mode = daemon.Mode(*raw.mode)
	for _, s := range splitList(*raw.exclude) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("--snat-exclude-cidrs: %w", err)
		}
		a.SNATExcludeCIDRs = append(a.SNATExcludeCIDRs, p.Masked())
	}
	if (c.brokerCert == "") != (c.brokerKey == "") {
		return errors.New("--broker-cert and --broker-key go together")
	}
	if c.brokerCert != "" && c.brokerCA == "" {
		return errors.New("--broker-cert needs --broker-ca")
	}
	if err := allotv1.CheckNodeName(a.NodeName); err != nil {
		return fmt.Errorf("--node-name: %w", err) // the broker would refuse every registration
	}
	if limit := plugin.DefaultTimeout - plugin.AgentMargin; a.MaxAddWait > limit {
		return fmt.Errorf("--max-add-wait %v is above %v: the plugin gives up on an ADD after its timeout (%v) "+
			"and the agent must answer %v before that, with the pod wired or \"try again later\"", a.MaxAddWait, limit,
			plugin.DefaultTimeout, plugin.AgentMargin)
	}
	if c.memoryLimitMiB < 0 {
		return errors.New("--memory-limit-mib must not be negative")
	}
	if c.gcPercent < -1 || c.gcPercent == 0 {
		return errors.New("--gc-percent must be positive, or -1 for off")
	}
	switch a.RepairTokenPath {
	case "":
		a.RepairTokenPath = filepath.Join(filepath.Dir(a.CheckpointPath), "repair-token")
	case "none":
		a.RepairTokenPath = ""
	}
	if a.Cooldown == 0 {
		a.Cooldown = -1 // an explicit 0 on the command line means none
	}
	if a.IMDSCheckAfter == 0 {
		a.IMDSCheckAfter = -1 // an explicit 0: no check
	}
	if a.DemandInterval == 0 {
		a.DemandInterval = -1 // likewise: no coalescing
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
