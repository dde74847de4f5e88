// Command soak runs allot's one-machine cluster under a kubelet-like
// driver and a fault schedule (agent kill -9, broker leader kill -9 and
// SIGSTOP, an etcd member killed, node termination, EC2 errors, latency
// and eventual consistency, buckets drained by other tenants) and checks its
// invariants the whole time and at the end. It prints a table and a final
// JSON line, removes everything it created, and exits 0 only when no
// invariant was violated. It needs root.
//
//	soak [--duration 60s] [--nodes 3] [--brokers 3] [--slots-per-node 6] [--fault-every 3s] [--node-every 1m] [--seed N]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/allotnet/allot/deploy/cluster"
	"github.com/allotnet/allot/deploy/soak"
	"github.com/allotnet/allot/internal/logfmt"
)

func main() {
	var cfg soak.Config
	var binDir string
	var verbose bool
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.DurationVar(&cfg.Duration, "duration", 60*time.Second, "how long the driver and the faults run (the end checks follow)")
	fs.IntVar(&cfg.Cluster.Nodes, "nodes", 3, "nodes (instances, each with an agent)")
	fs.IntVar(&cfg.SlotsPerNode, "slots-per-node", 6, "pod names each node's driver cycles through")
	fs.DurationVar(&cfg.FaultEvery, "fault-every", 3*time.Second, "pause between two faults")
	fs.DurationVar(&cfg.FaultWindow, "fault-window", 3*time.Second, "how long a frozen broker, EC2 errors, latency or eventual consistency, or drained buckets last")
	fs.DurationVar(&cfg.PartitionWindow, "partition-window", 8*time.Second,
		"how long a node stays cut off from every broker (longer than the cluster's 5s node TTL: the broker counts the node dead, then it comes back)")
	fs.DurationVar(&cfg.NodeEvery, "node-every", time.Minute, "pause between two node terminations (each node terminated is replaced by a new one)")
	fs.DurationVar(&cfg.GCEvery, "gc-every", 10*time.Second, "how often each node's driver calls CNI GC")
	fs.IntVar(&cfg.Cluster.Brokers, "brokers", 3, "allot-broker replicas, their embedded etcd members one cluster (1, 3 or 5)")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the driver, the faults and awssim (0: from the clock)")
	fs.Float64Var(&cfg.Cluster.TimeScale, "time-scale", 10, "simulated seconds per real second")
	fs.StringVar(&cfg.Cluster.Conflist, "conflist", "deploy/cni/10-allot.conflist", "CNI network configuration list the runtime uses")
	fs.StringVar(&cfg.Cluster.LogDir, "logs", "", "copy the broker's and agents' logs into this directory at the end")
	fs.StringVar(&binDir, "bin-dir", "", "directory holding allot, allot-agent, allot-broker and allotctl (default: this program's)")
	fs.BoolVar(&verbose, "v", false, "log the soak's progress to stderr")
	logFlags := logfmt.RegisterFormat(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	lopts, err := logFlags.Parse()
	if err != nil || fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "soak: bad arguments: %v %v\n", err, fs.Args())
		os.Exit(2)
	}
	if verbose {
		cfg.Logger = logfmt.New(os.Stderr, lopts)
	}
	cfg.Cluster.Stem = "allot-soak-"
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, cfg, binDir))
}

func run(ctx context.Context, cfg soak.Config, binDir string) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "soak: needs root (it creates network namespaces)")
		return 1
	}
	if binDir == "" {
		if exe, err := os.Executable(); err == nil {
			binDir = filepath.Dir(exe)
		}
	}
	bins, err := cluster.LocateBinaries(binDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v (run `make build`, or pass --bin-dir)\n", err)
		return 1
	}
	cfg.Cluster.Binaries = bins
	res, err := soak.Run(ctx, cfg, os.Stdout)
	return report(res, err, os.Stdout)
}

func report(res *soak.Result, err error, w io.Writer) int {
	if res != nil {
		res.WriteText(w)
		_ = res.WriteJSON(w)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		return 1
	}
	if !res.OK() {
		return 1
	}
	return 0
}
