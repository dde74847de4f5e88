// Command allot-scale runs the scale benchmark (bench/scale): by default
// 5,000 nodes running the real agent code, 30 pods each at once (150,000),
// the real broker on embedded etcd in a child process, awssim in another.
// It prints the burst benchmark's own table, the scale figures against
// their targets, and, last, one JSON line.
//
//	allot-scale [flags]            run the benchmark
//	allot-scale broker [flags]     (internal) the broker as a child process
//	allot-scale cloud [flags]      (internal) awssim as a child process
//	allot-scale etcd [flags]       (internal) etcd as a child process (--separate-etcd)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/allotnet/allot/bench/burst"
	"github.com/allotnet/allot/bench/scale"
	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/logfmt"
)

func main() {
	if buildinfo.PrintIfRequested("allot-scale", os.Args[1:], os.Stdout) {
		return
	}
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "broker", "cloud", "etcd":
			os.Exit(burst.RunChild("allot-scale", os.Args[1], os.Args[2:]))
		}
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("allot-scale", flag.ContinueOnError)
	nodes := fs.Int("nodes", scale.DefaultNodes, "nodes (instances)")
	pods := fs.Int("pods-per-node", scale.DefaultPodsPerNode, "pods requested at once on every node")
	ts := fs.Float64("time-scale", scale.DefaultTimeScale, "simulated seconds per real second")
	idle := fs.Duration("idle", scale.DefaultIdleWindow, "how long (simulated) the idle fleet's etcd writes are counted")
	fsync := fs.Bool("etcd-fsync", true, "fsync the broker's etcd as in production")
	childLogs := fs.Bool("child-logs", false, "pass the broker's and awssim's logs to stderr")
	upDown := fs.Bool("updown", false, "after the burst, delete every pod, wait for the pools to give back their excess, and burst again (use with --nodes 500 --pods-per-node 46)")
	downWindow := fs.Duration("down-window", burst.DefaultDownWindow, "with --updown: how long (simulated) the pods' deletion is spread over")
	brokerProfile := fs.String("broker-cpuprofile", "", "write the broker's CPU profile (the whole run) to this path plus a suffix")
	roundCPU := fs.Bool("round-cpu", false, "read each planning round's CPU time and report its quantiles beside the wall time's "+
		"(the broker's engine keeps one thread, which costs its rounds wall time on a busy machine)")
	brokerNice := fs.Int("broker-nice", 0, "the nice value of the broker's process (-20..19): below 0 the kernel runs the broker before the "+
		"harness's agents and awssim, as on a cluster where they run on machines of their own; 0: an equal share")
	cloudNice := fs.Int("cloud-nice", 0, "the nice value of awssim's process (-20..19), which stands for EC2; 0: an equal share")
	memLimit := fs.String("broker-memory-limit", "", "the broker's Go soft memory limit (GOMEMLIMIT for its process, e.g. 600MiB), "+
		"as allot-broker's --memory-limit sets it in a container; empty: none")
	separateEtcd := fs.Bool("separate-etcd", false, "run etcd in a process of its own and the broker against it (as with allot-broker --etcd-endpoints), "+
		"so the broker's RSS and etcd's are reported apart; by default the broker embeds etcd and its RSS includes etcd's")
	maxCalls := fs.Int("max-agent-calls", 0, "the broker's bound on the agents' calls that read or write etcd at once "+
		"(allot-broker's --max-agent-calls; 0: its default, negative: none)")
	logFlags := logfmt.Register(fs, "error")
	buildinfo.Flag(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "allot-scale: unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		return 2
	}
	level, err := logFlags.Parse()
	if err != nil {
		fmt.Fprintf(os.Stderr, "allot-scale: %v\n", err)
		return 2
	}
	if *memLimit != "" && !memLimitSyntax.MatchString(*memLimit) {
		fmt.Fprintf(os.Stderr, "allot-scale: --broker-memory-limit %q: want a size such as 600MiB\n", *memLimit)
		return 2
	}
	if *brokerNice < -20 || *brokerNice > 19 || *cloudNice < -20 || *cloudNice > 19 {
		fmt.Fprintln(os.Stderr, "allot-scale: --broker-nice and --cloud-nice must be in -20..19")
		return 2
	}
	if *ts <= 0 || *idle <= 0 {
		fmt.Fprintln(os.Stderr, "allot-scale: --time-scale and --idle must be positive")
		return 2
	}
	cfg := scale.BurstConfig(*nodes, *pods, *ts, *idle)
	cfg.EtcdFsync = *fsync
	if *upDown {
		cfg.IdleWindow, cfg.UpDown = 0, &burst.UpDown{DownWindow: *downWindow}
	}
	cfg.BrokerCPUProfile = *brokerProfile
	cfg.BrokerRoundCPU = *roundCPU
	cfg.BrokerNice = *brokerNice
	cfg.CloudNice = *cloudNice
	cfg.MaxAgentCalls = *maxCalls
	cfg.SeparateEtcd = *separateEtcd
	cfg.Logger = logfmt.New(os.Stderr, level)
	cfg.Progress = os.Stderr
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "allot-scale: find own executable: %v\n", err)
		return 1
	}
	cfg.Spawn = spawner(self, *memLimit)
	if *childLogs {
		cfg.ChildStderr = os.Stderr
	}
	if err := cfg.WithDefaults().Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "allot-scale: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := burst.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "allot-scale: %v\n", err)
		return 1
	}
	if err := rep.WriteTable(os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "allot-scale: %v\n", err)
		return 1
	}
	if len(rep.Results) != 1 {
		fmt.Fprintf(os.Stderr, "allot-scale: %d results, want 1\n", len(rep.Results))
		return 1
	}
	if *upDown {
		l := scale.NewUpDownLine(rep.Results[0], loadAverage())
		fmt.Println()
		if err := scale.WriteUpDown(os.Stdout, l); err != nil {
			fmt.Fprintf(os.Stderr, "allot-scale: %v\n", err)
			return 1
		}
		if l.Status != burst.StatusOK || l.InUseFreed > 0 {
			return 1
		}
		return 0
	}
	f := scale.FromResult(rep.Results[0], scale.DefaultTargets, loadAverage())
	f.MaxAgentCalls = *maxCalls
	f.BrokerNice, f.CloudNice = *brokerNice, *cloudNice
	fmt.Println()
	f.WriteTable(os.Stdout)
	b, err := json.Marshal(struct {
		Scale scale.Figures `json:"scale"`
	}{f})
	if err != nil {
		fmt.Fprintf(os.Stderr, "allot-scale: %v\n", err)
		return 1
	}
	fmt.Println(string(b))
	if f.Status != burst.StatusOK {
		return 1
	}
	return 0
}

// spawner starts the children as this executable's subcommands, the
// broker with memLimit as its GOMEMLIMIT when given.
func spawner(self, memLimit string) func(role string, args []string) *exec.Cmd {
	return func(role string, args []string) *exec.Cmd {
		cmd := exec.Command(self, append([]string{role}, args...)...)
		if role == "broker" && memLimit != "" {
			cmd.Env = append(os.Environ(), "GOMEMLIMIT="+memLimit)
		}
		return cmd
	}
}

// memLimitSyntax is the form of GOMEMLIMIT the flag accepts: a number of
// bytes with an optional unit.
var memLimitSyntax = regexp.MustCompile(`^[0-9]+(B|KiB|MiB|GiB)?$`)

// loadAverage is the machine's 1, 5 and 15-minute load averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
