package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/allotnet/allot/broker/brokerd"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/leader"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/server"
	"github.com/allotnet/allot/broker/subnets"
	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/logfmt"
	"github.com/allotnet/allot/internal/telemetry/traceconf"
)

// config is everything the broker is told on its command line; main builds
// it and passes it down, nothing else reads flags or the environment.
type config struct {
	name    string
	cluster string
	listen  string
	// metricsAddr serves /metrics, /healthz and /readyz, read-only; empty: off.
	metricsAddr string
	// trace is read from the OpenTelemetry environment by main.
	trace traceconf.TraceConfig

	// etcd: external endpoints (with optional TLS), or embedded in dataDir.
	etcdEndpoints []string
	etcdCACert    string
	etcdCert      string
	etcdKey       string
	dataDir       string
	etcd          embeddedEtcd

	ec2Region   string
	ec2Endpoint string
	// bucketShare is the fraction of each EC2 token bucket allot may use.
	bucketShare float64
	// timeScale speeds the broker's clocks up to match a simulation's
	// (awssim's --time-scale). Only a simulator needs it, so --help does
	// not list it.
	timeScale float64
	// gather and gatherMax are the engine's wait for a node's demand to
	// settle (executor.Config.Gather, GatherMax).
	gather, gatherMax time.Duration
	// newENILag is how much later than an Assign's a new ENI's addresses
	// reach a node (executor.Config.NewENILag).
	newENILag time.Duration
	// planPolicy is what the planner makes least, EC2 calls or time
	// (executor.Config.PlanPolicy).
	planPolicy planner.Policy

	electionTTL     time.Duration
	nodeTTL         time.Duration
	maxAgentCalls   int
	shutdownTimeout time.Duration
	log             logfmt.Options

	// gRPC TLS: a certificate makes it TLS; a client CA makes it mutual.
	tlsCert     string
	tlsKey      string
	tlsClientCA string

	// Who may call: node attestation against identityCert, roles from
	// client certificates (docs/security.md); or, only when insecure is
	// set explicitly, anyone in plaintext.
	identityCert  string
	attestAccount string
	attestVPCs    []string
	nodeTokenTTL  time.Duration
	insecure      bool

	// podSubnets selects the subnets recorded at start.
	podSubnets subnets.Selector

	// memLimit is the Go runtime's soft memory limit and gcPercent its
	// collector's GOGC; main applies them.
	memLimit  memoryLimit
	gcPercent int
}

// insecureFlag serves anyone in plaintext. Its name says so, so nobody sets
// it by accident.
const insecureFlag = "insecure-no-tls-no-auth"

// hiddenTimeScale is the flag for running against a simulated EC2 whose
// clock runs faster; it works but is left out of --help.
const hiddenTimeScale = "time-scale"

// usage prints the flags --help shows: all but the hidden one.
func usage(fs *flag.FlagSet) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(fs.Output())
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != hiddenTimeScale {
			shown.Var(f.Value, f.Name, f.Usage)
		}
	})
	fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
	shown.PrintDefaults()
}

// parseFlags builds the config from args.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	host, _ := os.Hostname()
	c := config{memLimit: memoryLimit{auto: true}}
	fs := flag.NewFlagSet("allot-broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.name, "name", host, "this replica's name in leader election and status")
	fs.StringVar(&c.cluster, "cluster", "default", "cluster name: the etcd key prefix and the allot.dev/cluster tag on ENIs")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:7600", "gRPC listen address")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "address serving /metrics, /healthz (alive) and /readyz (serving) alone, read-only, for Prometheus and probes: "+
		"the pod's IP (e.g. $(POD_IP):7601) or 0.0.0.0:7601 (empty: off)")
	endpoints := fs.String("etcd-endpoints", "", "comma-separated external etcd endpoints; empty runs an embedded etcd in --data-dir")
	fs.StringVar(&c.etcdCACert, "etcd-cacert", "", "CA bundle to verify etcd's TLS certificates")
	fs.StringVar(&c.etcdCert, "etcd-cert", "", "client certificate for etcd")
	fs.StringVar(&c.etcdKey, "etcd-key", "", "client key for etcd")
	fs.StringVar(&c.dataDir, "data-dir", "/var/lib/allot-broker", "data directory of the embedded etcd")
	c.etcd.flags(fs)
	var sf subnetFlags
	sf.register(fs)
	fs.StringVar(&c.ec2Region, "ec2-region", "", "EC2 region (default: the AWS SDK's chain, e.g. AWS_REGION; us-east-1 with --ec2-endpoint)")
	fs.StringVar(&c.ec2Endpoint, "ec2-endpoint", "", "EC2 endpoint override (e.g. awssim's URL); static test credentials are used with it")
	fs.Float64Var(&c.bucketShare, "bucket-share", 0.5, "fraction (0,1] of each EC2 request bucket this broker may use; leave room for other tools")
	fs.Float64Var(&c.timeScale, hiddenTimeScale, 1, "simulated seconds per real second, matching awssim's --time-scale")
	fs.DurationVar(&c.gather, "gather", executor.DefaultGather, "how long a node's demand must stay unchanged before it is planned, so pods arriving together cost one EC2 call")
	fs.DurationVar(&c.gatherMax, "gather-max", executor.DefaultGatherMax, "longest wait for a node's demand to settle before it is planned anyway")
	fs.DurationVar(&c.newENILag, "new-eni-lag", executor.DefaultNewENILag, "how much later than an AssignPrivateIpAddresses' addresses a new ENI's reach a node (attach, IMDS, setup); the time-optimal planner ends new ENIs that much earlier (0: none)")
	policy := fs.String("plan-policy", planner.TimeOptimal.String(), "what plans make least when a node's demand can be met either way: "+
		"time-optimal (fill existing ENIs and create new ones filled, so every EC2 bucket works at once: the burst ends sooner, for more calls) "+
		"or fewest-calls (fill existing ENIs first); naive (each node alone, first fit, new ENIs created empty) is for benchmark comparison only")
	fs.DurationVar(&c.electionTTL, "election-ttl", leader.DefaultTTL, "leader session TTL: how long a dead leader keeps the lead (a standby's first EC2 call comes within about twice this)")
	fs.DurationVar(&c.nodeTTL, "node-ttl", 30*time.Second, "how long a node counts as alive after its last heartbeat")
	fs.IntVar(&c.maxAgentCalls, "max-agent-calls", server.DefaultMaxAgentCalls, "how many of the agents' calls that read or write etcd "+
		"(all but heartbeats and watch streams) the broker runs at once; beyond it, and for a node whose earlier call of the same kind still runs, "+
		"a call is refused as busy (UNAVAILABLE) and the agent retries with backoff; -1: no total bound")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight calls may run after SIGTERM")
	fs.Var(&c.memLimit, "memory-limit", "soft limit on the Go runtime's memory, e.g. 450MiB: the garbage collector works harder near it "+
		"instead of letting the heap grow to twice what is live; auto: GOMEMLIMIT if set, else 85% of the container's memory limit "+
		"(cgroup), else none; 0: none")
	fs.IntVar(&c.gcPercent, "gc-percent", brokerd.DefaultGCPercent, "how far, in percent of the live heap and stacks, the heap grows before the "+
		"garbage collector runs again; lower keeps less memory for more GC CPU (GOGC, when set, wins)")
	logFlags := logfmt.Register(fs, "info")
	buildinfo.Flag(fs)
	vpcs := c.securityFlags(fs)
	fs.Usage = func() { usage(fs) }
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	for _, e := range strings.Split(*endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			c.etcdEndpoints = append(c.etcdEndpoints, e)
		}
	}
	var err error
	if c.planPolicy, err = planner.ParsePolicy(*policy); err != nil {
		return c, fmt.Errorf("--plan-policy: %w", err)
	}
	if c.log, err = logFlags.Parse(); err != nil {
		return c, err
	}
	if err := c.checkValues(); err != nil {
		return c, err
	}
	if err := c.etcd.validate(c); err != nil {
		return c, err
	}
	c.attestVPCs = splitComma(*vpcs)
	if c.podSubnets, err = sf.selector(); err != nil {
		return c, err
	}
	return c, checkSecurity(c)
}

// securityFlags registers TLS, role and attestation flags; it returns the
// raw VPC list, which parseFlags splits once the flags are parsed.
func (c *config) securityFlags(fs *flag.FlagSet) *string {
	fs.StringVar(&c.tlsCert, "tls-cert", "", "server certificate for gRPC (plaintext if empty)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "server key for gRPC")
	fs.StringVar(&c.tlsClientCA, "tls-client-ca", "", "CA bundle that planners', operators' and per-node client certificates must chain to; "+
		"their allot:// URI SAN names the role (docs/security.md)")
	fs.StringVar(&c.identityCert, "identity-cert", "", "PEM certificate that verifies EC2 instance identity documents "+
		"(AWS's public certificate for the region, \"signature\" form); turns node attestation on")
	fs.StringVar(&c.attestAccount, "attest-account-id", "", "only instances of this AWS account may attest (default: any the broker's EC2 credentials can describe)")
	vpcs := fs.String("attest-vpc-ids", "", "comma-separated VPCs attesting instances must be in (default: any)")
	fs.DurationVar(&c.nodeTokenTTL, "node-token-ttl", 15*time.Minute, "lifetime of the token a node gets by attesting; agents attest again at half of it")
	fs.BoolVar(&c.insecure, insecureFlag, false, "serve gRPC in plaintext to ANYONE who can reach --listen, "+
		"letting them make this broker call EC2 for any instance; for throwaway tests only")
	return vpcs
}

// checkValues refuses flag values that cannot work together.
func (c config) checkValues() error {
	switch {
	case c.name == "":
		return errors.New("--name is required (no hostname to default to)")
	case c.bucketShare <= 0 || c.bucketShare > 1:
		return fmt.Errorf("--bucket-share %g: want a fraction in (0, 1]", c.bucketShare)
	case c.timeScale <= 0:
		return fmt.Errorf("--time-scale %g: want a positive number", c.timeScale)
	case c.newENILag < 0:
		return fmt.Errorf("--new-eni-lag %v: want 0 or more", c.newENILag)
	case c.gather <= 0 || c.gatherMax < c.gather:
		return fmt.Errorf("--gather %v, --gather-max %v: want 0 < gather <= gather-max", c.gather, c.gatherMax)
	case c.electionTTL < time.Second:
		return fmt.Errorf("--election-ttl %s: want at least 1s", c.electionTTL)
	case c.gcPercent < 1:
		return fmt.Errorf("--gc-percent %d: want a positive percentage", c.gcPercent)
	case (c.tlsCert == "") != (c.tlsKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case c.tlsClientCA != "" && c.tlsCert == "":
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key")
	case len(c.etcdEndpoints) == 0 && (c.etcdCACert != "" || c.etcdCert != ""):
		return errors.New("--etcd-cacert/--etcd-cert are for external etcd; set --etcd-endpoints")
	}
	return nil
}

// checkSecurity refuses to serve without TLS and a way to authenticate,
// unless the insecure flag is given (and then nothing that pretends
// otherwise).
func checkSecurity(c config) error {
	secure := c.tlsCert != "" || c.tlsClientCA != "" || c.identityCert != ""
	switch {
	case c.insecure && secure:
		return fmt.Errorf("--%s serves anyone in plaintext; drop it or the TLS and identity flags", insecureFlag)
	case c.insecure:
		return nil
	case c.tlsCert == "":
		return fmt.Errorf("refusing to start without TLS: give --tls-cert and --tls-key, with --identity-cert "+
			"(node attestation) and/or --tls-client-ca (client certificates) - see docs/security.md; "+
			"--%s serves anyone in plaintext instead", insecureFlag)
	case c.identityCert == "" && c.tlsClientCA == "":
		return errors.New("no caller could authenticate: give --identity-cert (node attestation) and/or --tls-client-ca (client certificates)")
	case c.nodeTokenTTL < time.Minute:
		return fmt.Errorf("--node-token-ttl %s: want at least 1m", c.nodeTokenTTL)
	}
	return nil
}

func splitComma(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
