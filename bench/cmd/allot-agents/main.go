// Command allot-agents runs the agents-as-processes benchmark
// (bench/agents): real allot-agent processes with their nodes' namespaces,
// a burst of pods through the allot CNI plugin, memory and CPU read from
// /proc, one node replacing its pods, and the pool alone with its
// checkpoint on disk, with and without group commit. It prints tables and,
// last, one JSON line. It needs root; everything it creates is removed.
//
//	allot-agents [--nodes 3] [--pods-per-node 110] [--parallel 4] [--churn 20s] [--pool-duration 5s] [--checkpoint-dir DIR]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/allotnet/allot/bench/agents"
	"github.com/allotnet/allot/deploy/cluster"
	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/logfmt"
)

func main() {
	if buildinfo.PrintIfRequested("allot-agents", os.Args[1:], os.Stdout) {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C ends the process at once
	}()
	os.Exit(run(ctx, os.Args[1:]))
}

func parseFlags(args []string) (agents.Config, string, error) {
	var cfg agents.Config
	c := &cfg.Cluster
	fs := flag.NewFlagSet("allot-agents", flag.ContinueOnError)
	fs.IntVar(&c.Nodes, "nodes", agents.DefaultNodes, "nodes, each with its own allot-agent process")
	fs.IntVar(&cfg.PodsPerNode, "pods-per-node", agents.DefaultPodsPerNode, "pods created on every node in one burst")
	fs.IntVar(&cfg.Parallel, "parallel", agents.DefaultParallel, "ADDs in flight per node (and replacements in the churn)")
	fs.StringVar(&c.Mode, "mode", cluster.ModePrefix, "address mode: secondary-ip or prefix")
	fs.StringVar(&c.InstanceType, "instance-type", "c5.xlarge", "instance type of every node")
	fs.Float64Var(&c.TimeScale, "time-scale", 10, "simulated seconds per real second")
	fs.DurationVar(&cfg.Idle, "idle", agents.DefaultIdle, "how long idle CPU is measured, before and after the burst")
	fs.DurationVar(&cfg.Churn, "churn", agents.DefaultChurn, "how long the first node replaces its pods (negative: skip)")
	fs.DurationVar(&cfg.Pool.Duration, "pool-duration", 5*time.Second, "how long the pool alone churns in each commit mode (0: skip)")
	fs.IntVar(&cfg.Pool.Workers, "pool-workers", 8, "changes in flight in the pool benchmark")
	fs.StringVar(&cfg.Pool.Dir, "checkpoint-dir", "", "where the pool benchmark's checkpoint goes (default: the temporary directory; "+
		"the agents' checkpoints are in their run directory there too)")
	agentArgs := fs.String("agent-args", "", "space-separated flags added to every agent's command line")
	agentEnv := fs.String("agent-env", "", "space-separated NAME=VALUE added to every agent's and the broker's environment")
	binDir := fs.String("bin-dir", "", "directory holding allot, allot-agent, allot-broker and allotctl (default: this program's)")
	fs.StringVar(&c.Conflist, "conflist", "deploy/cni/10-allot.conflist", "CNI network configuration list the runtime uses")
	fs.StringVar(&c.LogDir, "logs", "", "copy the broker's and agents' logs into this directory at the end")
	logFlags := logfmt.Register(fs, "error")
	buildinfo.Flag(fs)
	if err := fs.Parse(args); err != nil {
		return cfg, "", err
	}
	if fs.NArg() > 0 {
		return cfg, "", fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	level, err := logFlags.Parse()
	if err != nil {
		return cfg, "", err
	}
	c.Logger = logfmt.New(os.Stderr, level)
	c.AgentArgs, c.Env = strings.Fields(*agentArgs), strings.Fields(*agentEnv)
	return cfg, *binDir, nil
}

func run(ctx context.Context, args []string) int {
	cfg, binDir, err := parseFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "allot-agents: %v\n", err)
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "allot-agents: needs root (it creates network namespaces); run it with sudo")
		return 1
	}
	if binDir == "" {
		if exe, err := os.Executable(); err == nil {
			binDir = filepath.Dir(exe)
		}
	}
	if cfg.Cluster.Binaries, err = cluster.LocateBinaries(binDir); err != nil {
		fmt.Fprintf(os.Stderr, "allot-agents: %v\n", err)
		return 1
	}
	cfg.Progress = os.Stderr
	rep, err := agents.Run(ctx, cfg)
	if rep != nil {
		if err == nil {
			rep.WriteText(os.Stdout)
		}
		_ = rep.WriteJSON(os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "allot-agents: %v\n", err)
		return 1
	}
	return 0
}
