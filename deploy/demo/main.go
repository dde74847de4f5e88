// Command demo runs allot end to end on this machine and reports what it
// measured: awssim as EC2 and IMDS with its VPC data plane in network
// namespaces, allot-broker on embedded etcd, an allot-agent per node, and a
// burst of pods created through the allot CNI plugin via libcni, as a
// container runtime does. It checks pod-to-pod traffic across nodes and
// SNAT to an outside host with real packets, deletes every pod, checks
// nothing leaked, and removes everything it created. It needs root.
//
//	demo [--nodes 3] [--pods-per-node 20] [--parallel 4] [--time-scale 10] [--mode secondary-ip|prefix] [--custom-networking]
//
// With --custom-networking the nodes sit in 10.0.0.0/16 while a pod
// network per zone, set through the broker's API as an operator would,
// puts every new ENI, and so every pod, in 100.64.0.0/16 subnets with
// security groups of their own; the report says where each pod's address
// came from.
//
// It exits 0 when every check passed, 1 when one failed or the run broke,
// 2 on a usage error and 130 when interrupted (after cleaning up; a second
// Ctrl-C quits at once, and the next run removes what was left).
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
	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/logfmt"
)

type options struct {
	demo     cluster.DemoConfig
	binDir   string
	verbose  bool
	jsonOnly bool
	log      logfmt.Options
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	c := &o.demo.Cluster
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.Nodes, "nodes", 3, "nodes (instances, each with an agent)")
	fs.IntVar(&o.demo.PodsPerNode, "pods-per-node", 20, "pods created on every node in one burst")
	fs.IntVar(&o.demo.Parallel, "parallel", 4, "ADDs each node's runtime runs at once (0: the whole burst at once; "+
		"every node shares this machine's CPUs, a real node has its own)")
	fs.Float64Var(&c.TimeScale, "time-scale", 10, "simulated seconds per real second (EC2 token buckets, detaches, IMDS lag and the broker's timers)")
	fs.StringVar(&c.Mode, "mode", cluster.ModeSecondaryIP, "address mode: secondary-ip or prefix")
	fs.BoolVar(&c.CustomNetworking, "custom-networking", false, "nodes in 10.0.0.0/16, pods in 100.64.0.0/16 subnets: "+
		"a pod network per zone set through the broker's API before the nodes join (docs/demo.md)")
	fs.StringVar(&c.InstanceType, "instance-type", "c5.xlarge", "instance type of every node")
	fs.IntVar(&c.Warm.WarmIPs, "warm-ip-target", 0, "agents' WARM_IP_TARGET (default: one warm ENI, or one warm prefix)")
	fs.IntVar(&c.Warm.MinimumIPs, "minimum-ip-target", 0, "agents' MINIMUM_IP_TARGET")
	fs.StringVar(&o.binDir, "bin-dir", "", "directory holding allot, allot-agent, allot-broker and allotctl "+
		"(default: this program's directory, else they are built from the module in the working directory)")
	fs.StringVar(&c.Conflist, "conflist", "deploy/cni/10-allot.conflist", "CNI network configuration list the runtime uses")
	fs.StringVar(&c.LogDir, "logs", "", "copy the broker's and agents' logs into this directory at the end")
	fs.DurationVar(&o.demo.AddTimeout, "add-timeout", 3*time.Minute, "bound on the pod burst")
	fs.DurationVar(&o.demo.SettleTimeout, "settle-timeout", 3*time.Minute, "bound on the wait for the cluster to be back within warm targets")
	fs.BoolVar(&o.verbose, "v", false, "log the harness, awssim and data plane to stderr")
	fs.BoolVar(&o.jsonOnly, "json", false, "print only the final JSON line")
	logFlags := logfmt.RegisterFormat(fs)
	buildinfo.Flag(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.log, err = logFlags.Parse(); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.demo.PodsPerNode < 1 {
		return o, errors.New("--pods-per-node must be at least 1")
	}
	c.Stem = "allot-demo-"
	return o, nil
}

func main() {
	if buildinfo.PrintIfRequested("demo", os.Args[1:], os.Stdout) {
		return
	}
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C ends the process at once
	}()
	os.Exit(run(ctx, o))
}

func run(ctx context.Context, o options) int {
	progress := io.Writer(os.Stdout)
	if o.jsonOnly {
		progress = io.Discard
	}
	if o.verbose {
		log := logfmt.New(os.Stderr, o.log)
		o.demo.Cluster.Logger = log
		o.demo.Cluster.ComponentLogger = log
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "demo: needs root (it creates network namespaces); run it with sudo")
		return 1
	}
	bins, cleanup, err := binaries(ctx, o.binDir, progress)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		return 1
	}
	defer cleanup()
	o.demo.Cluster.Binaries = bins

	rep, err := cluster.RunDemo(ctx, o.demo, progress)
	if rep != nil {
		// A run cut short has no figures worth a table; its JSON line says
		// what was checked and why it stopped.
		if !o.jsonOnly && err == nil {
			rep.WriteText(os.Stdout)
		}
		_ = rep.WriteJSON(os.Stdout)
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(os.Stderr, "demo: interrupted; everything it created was removed")
		return 130
	case err != nil:
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		return 1
	case !rep.Passed:
		return 1
	}
	return 0
}

// binaries finds the four programs next to this one (bin/ after `make
// build`) or in --bin-dir, and otherwise builds them into a temporary
// directory from the module in the working directory (`go run
// ./deploy/demo`).
func binaries(ctx context.Context, dir string, progress io.Writer) (cluster.Binaries, func(), error) {
	noop := func() {}
	if dir != "" {
		b, err := cluster.LocateBinaries(dir)
		return b, noop, err
	}
	if exe, err := os.Executable(); err == nil {
		if b, err := cluster.LocateBinaries(filepath.Dir(exe)); err == nil {
			return b, noop, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return cluster.Binaries{}, noop, err
	}
	mod, err := cluster.ModuleDir(wd)
	if err != nil {
		return cluster.Binaries{}, noop, fmt.Errorf("%w; run from the repository or pass --bin-dir", err)
	}
	tmp, err := os.MkdirTemp("", "allot-bin-")
	if err != nil {
		return cluster.Binaries{}, noop, err
	}
	fmt.Fprintf(progress, "-- building allot, allot-agent, allot-broker and allotctl from %s\n", mod)
	b, err := cluster.BuildBinaries(ctx, mod, tmp)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return b, noop, err
	}
	return b, func() { _ = os.RemoveAll(tmp) }, nil
}
