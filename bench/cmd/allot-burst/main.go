// Command allot-burst runs the burst benchmark (bench/burst): N nodes
// running the real agent, the real broker on embedded etcd, awssim with
// EC2's throttling at a time scale; P pods per node at once; secondary IPs
// and prefixes, bucket shares 100% and 50%, and the aws-vpc-cni ipamd
// baseline against the same simulated account. It prints a table and, last,
// one JSON line with every figure.
//
//	allot-burst [flags]            run the benchmark
//	allot-burst broker [flags]     (internal) the broker as a child process
//	allot-burst cloud [flags]      (internal) awssim as a child process
//
// The broker and awssim run as child processes of the harness (this binary
// re-executed), so the broker's CPU and memory are its own and the
// harness's memory growth is the agents'.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/awssim/throttle"
	"github.com/allotnet/allot/bench/burst"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/logfmt"
)

func main() {
	if buildinfo.PrintIfRequested("allot-burst", os.Args[1:], os.Stdout) {
		return
	}
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "broker", "cloud":
			os.Exit(burst.RunChild("allot-burst", os.Args[1], os.Args[2:]))
		}
	}
	os.Exit(run(os.Args[1:]))
}

// run is the harness.
func run(args []string) int {
	cfg, level, profile, err := parseFlags(args, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "allot-burst: %v\n", err)
		return 2
	}
	cfg.Logger = logfmt.New(os.Stderr, level)
	cfg.Progress = os.Stderr
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "allot-burst: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "allot-burst: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Each variant's figures reach stdout as it finishes: a run that dies
	// or is interrupted later keeps them.
	fmt.Println(burst.ResultHeader)
	cfg.OnResult = func(r burst.Result) {
		if err := r.WriteLine(os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "allot-burst: %v\n", err)
		}
	}
	rep, err := burst.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "allot-burst: %v\n", err)
		return 1
	}
	fmt.Printf("machine: %d CPUs (%s), %s memory, Linux %s, %s; run took %.0fs wall\n",
		rep.Machine.CPUs, rep.Machine.CPUModel, rep.Machine.MemTotal, rep.Machine.Kernel, rep.Machine.GoVersion, rep.WallTime)
	if err := rep.WriteTable(os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "allot-burst: %v\n", err)
		return 1
	}
	if err := rep.WriteSummary(os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "allot-burst: %v\n", err)
		return 1
	}
	if err := rep.WriteJSON(os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "allot-burst: %v\n", err)
		return 1
	}
	if n := rep.Failed(); n > 0 {
		fmt.Fprintf(os.Stderr, "allot-burst: %d of %d variants did not run to the end (see status)\n", n, len(rep.Results))
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (burst.Config, logfmt.Options, string, error) {
	var cfg burst.Config
	var level logfmt.Options
	var profile string
	fs := flag.NewFlagSet("allot-burst", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Nodes, "nodes", burst.DefaultNodes, "nodes (instances) in the burst")
	fs.IntVar(&cfg.PodsPerNode, "pods-per-node", burst.DefaultPodsPerNode, "pods requested at once on every node")
	fs.StringVar(&cfg.InstanceType, "instance-type", burst.DefaultInstanceType, "every node's instance type")
	fs.Float64Var(&cfg.TimeScale, "time-scale", 0, fmt.Sprintf("simulated seconds per real second, for every variant (0: %g with secondary IPs, %g with prefixes)", float64(burst.DefaultTimeScale), float64(burst.DefaultPrefixTimeScale)))
	profiles := fs.String("profiles", burst.ProfileAll, "arrival profiles, comma-separated: all (every pod at once), ramp=PODS_PER_S (cluster-wide), join=FRACTION (of nodes joining during the burst); "+burst.DefaultProfiles+" measures all three")
	modes := fs.String("modes", "secondary-ip,prefix", "address modes to run, comma-separated")
	shares := fs.String("shares", "1,0.5", "broker bucket shares to run, comma-separated")
	describe := fs.String("describe-buckets", "per-api", "awssim's describe buckets: per-api (EC2's documented model) or shared (one for every Describe action)")
	refill := fs.String("refill", "continuous", "awssim's bucket refill: continuous, or discrete (once per simulated second)")
	tableErrors := fs.String("table-errors", "", "also run allot (share 1) with its bucket table wrong by each fraction, comma-separated (e.g. 0.2,-0.2)")
	tenants := fs.String("tenants", "", "also run allot at every share with another tool taking each fraction of every bucket, comma-separated (e.g. 0.5)")
	fs.BoolVar(&cfg.Baseline, "baseline", true, "also run the aws-vpc-cni ipamd baseline for every mode")
	fs.BoolVar(&cfg.SubnetDiscovery, "subnet-discovery", true, "baseline: DescribeSubnets before each CreateNetworkInterface (ipamd's default)")
	fs.IntVar(&cfg.BaselineMaxAttempts, "baseline-max-attempts", 0, "ipamd baseline: SDK attempts per EC2 call (0: ipamd's own, 10)")
	fs.BoolVar(&cfg.Cilium, "cilium", true, "also run the Cilium operator model for every mode")
	ciliumTuned := fs.String("cilium-tuned", burst.DefaultCiliumTuned, "Cilium operator configurations to run besides the defaults, as mode:setting=v,setting=v entries separated by ';' (empty: none)")
	ipamdTuned := fs.String("ipamd-tuned", burst.DefaultIPAMDTuned, "ipamd configurations to run besides the defaults, as mode:SETTING=V,SETTING=V entries separated by ';' (empty: none)")
	fs.IntVar(&cfg.Subnets, "subnets", burst.DefaultSubnets, "node subnets (a /16 each, over three AZs)")
	fs.IntVar(&cfg.JoinBatch, "join-batch", burst.DefaultJoinBatch, "nodes that join at a time, each batch warm before the next")
	fs.DurationVar(&cfg.Deadline, "deadline", burst.DefaultDeadline, "longest a burst may take, simulated")
	fs.BoolVar(&cfg.EtcdFsync, "etcd-fsync", true, "fsync the broker's etcd as in production")
	fs.Int64Var(&cfg.Seed, "seed", 1, "awssim seed")
	fs.Float64Var(&cfg.AccountScale, "account-scale", 1, "scale every EC2 bucket of the simulated account (size and refill) by this fraction; the broker is told")
	quick := fs.Bool("quick", false, fmt.Sprintf("the CI-sized run: %d nodes against an account at %g%% of EC2's buckets (so every ratio is defined), bucket share 1, baselines at their defaults only; flags given explicitly win", burst.QuickNodes, 100*burst.QuickAccountScale))
	nodeCounts := fs.String("node-counts", "", "a sweep: run everything at each node count, comma-separated (overrides --nodes)")
	seeds := fs.String("seeds", "", "repetitions: run everything with each awssim seed, comma-separated (overrides --seed)")
	timeScales := fs.String("time-scales", "", "run everything at each time scale, comma-separated (overrides --time-scale)")
	fs.StringVar(&cfg.PlanPolicy, "plan-policy", "", "allot's planner policy: time-optimal, fewest-calls or naive (empty: allot-broker's default)")
	planPolicies := fs.String("plan-policies", "", "run every allot variant once per planner policy, comma-separated (e.g. time-optimal,fewest-calls); overrides --plan-policy")
	fs.BoolVar(&cfg.Ablation, "ablation", true, "also run allot with the naive planner policy (the ablation) at share 1 in every mode")
	inProcess := fs.Bool("in-process", false, "run the broker and awssim in the harness process (no CPU/RSS attribution)")
	fs.StringVar(&cfg.BrokerCPUProfile, "broker-cpuprofile", "", "write each variant's broker CPU profile to this path plus a suffix")
	fs.StringVar(&profile, "cpuprofile", "", "write the harness's own CPU profile (the nodes and the kubelet stand-in) to this file")
	childLogs := fs.Bool("child-logs", false, "pass the broker's and awssim's logs to stderr")
	logFlags := logfmt.Register(fs, "error")
	buildinfo.Flag(fs)
	if err := fs.Parse(args); err != nil {
		return cfg, level, profile, err
	}
	if fs.NArg() > 0 {
		return cfg, level, profile, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	var err error
	if level, err = logFlags.Parse(); err != nil {
		return cfg, level, profile, err
	}
	if *quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["nodes"] {
			cfg.Nodes = burst.QuickNodes
		}
		if !set["account-scale"] {
			cfg.AccountScale = burst.QuickAccountScale
		}
		if !set["shares"] {
			*shares = "1"
		}
		if !set["ipamd-tuned"] {
			*ipamdTuned = ""
		}
		if !set["cilium-tuned"] {
			*ciliumTuned = ""
		}
	}
	if cfg.NodeCounts, err = ints("node-counts", *nodeCounts); err != nil {
		return cfg, level, profile, err
	}
	if cfg.TimeScales, err = floats("time-scales", *timeScales); err != nil {
		return cfg, level, profile, err
	}
	var ss []int
	if ss, err = ints("seeds", *seeds); err != nil {
		return cfg, level, profile, err
	}
	for _, x := range ss {
		cfg.Seeds = append(cfg.Seeds, int64(x))
	}
	for _, m := range strings.Split(*modes, ",") {
		if m = strings.TrimSpace(m); m != "" {
			cfg.Modes = append(cfg.Modes, daemon.Mode(m))
		}
	}
	if cfg.Shares, err = floats("shares", *shares); err != nil {
		return cfg, level, profile, err
	}
	if cfg.TableErrors, err = floats("table-errors", *tableErrors); err != nil {
		return cfg, level, profile, err
	}
	if cfg.Tenants, err = floats("tenants", *tenants); err != nil {
		return cfg, level, profile, err
	}
	if cfg.Profiles, err = burst.ParseProfiles(*profiles); err != nil {
		return cfg, level, profile, err
	}
	if cfg.IPAMDTuned, err = burst.ParseTunings(*ipamdTuned); err != nil {
		return cfg, level, profile, err
	}
	if cfg.CiliumTuned, err = burst.ParseCiliumTunings(*ciliumTuned); err != nil {
		return cfg, level, profile, err
	}
	if cfg.SharedDescribe, err = throttle.ParseDescribe(*describe); err != nil {
		return cfg, level, profile, err
	}
	if cfg.DiscreteRefill, err = throttle.ParseRefill(*refill); err != nil {
		return cfg, level, profile, err
	}
	for _, p := range strings.Split(*planPolicies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			if _, err := planner.ParsePolicy(p); err != nil {
				return cfg, level, profile, fmt.Errorf("--plan-policies: %w", err)
			}
			cfg.PlanPolicies = append(cfg.PlanPolicies, p)
		}
	}
	if cfg.PlanPolicy != "" {
		if _, err := planner.ParsePolicy(cfg.PlanPolicy); err != nil {
			return cfg, level, profile, fmt.Errorf("--plan-policy: %w", err)
		}
	}
	if !*inProcess {
		self, err := os.Executable()
		if err != nil {
			return cfg, level, profile, fmt.Errorf("find own executable to run the broker and awssim as children: %w", err)
		}
		cfg.Spawn = func(role string, args []string) *exec.Cmd {
			return exec.Command(self, append([]string{role}, args...)...)
		}
	}
	if *childLogs {
		cfg.ChildStderr = os.Stderr
	}
	if err := cfg.WithDefaults().Validate(); err != nil {
		return cfg, level, profile, err
	}
	return cfg, level, profile, nil
}

// ints parses a comma-separated list of whole numbers given to --name.
func ints(name, list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		v, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("--%s %q: %w", name, s, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// floats parses a comma-separated list of numbers given to --name.
func floats(name, list string) ([]float64, error) {
	var out []float64
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("--%s %q: %w", name, s, err)
		}
		out = append(out, v)
	}
	return out, nil
}
