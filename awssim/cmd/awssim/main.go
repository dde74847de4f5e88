// Command awssim runs the stand-in AWS: an EC2 Query API endpoint, one IMDS
// listener per simulated instance, and an admin endpoint, built from a
// scenario file.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/enilinks"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/logfmt"
)

func main() {
	if buildinfo.PrintIfRequested("awssim", os.Args[1:], os.Stdout) {
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "awssim:", err)
		os.Exit(1)
	}
}

const usageHead = `awssim — a stand-in AWS for allot: EC2 Query API, per-instance IMDS, admin API.

Usage: awssim [flags]

Point the aws-sdk-go-v2 ec2 client at the EC2 endpoint it prints (BaseEndpoint,
any static credentials, region us-east-1); each instance's IMDS endpoint is
listed by GET <admin>/v1/instances. Simulated time runs --time-scale times
faster than real time: every token-bucket refill, detach delay and IMDS lag
speeds up alike.

Flags:
`

const usageTail = `
Admin API (JSON, on --admin-addr):
  GET  /healthz                        ok
  GET  /v1/counters                    {"Action": {"calls":N,"throttled":N,"errors":N}}
  POST /v1/counters/reset
  GET  /v1/instances                   instances with their IMDS endpoints
  POST /v1/instances                   {"subnet":"private-a","type":"m5.large","count":2,"tags":{}}
  DELETE /v1/instances/{id}            terminate (ENIs with DeleteOnTermination go too)
  GET  /v1/subnets                     exact available address counts
  GET  /v1/enis                        every ENI, including not-yet-visible ones
  GET|PUT /v1/faults                   {"actions":{"AttachNetworkInterface":{"errorRate":0.1,
                                        "errorCode":"InternalError","latency":"300ms"}},
                                        "consistencyWindow":"2s","imdsLag":"1s"}
  GET  /v1/identity-certificate       PEM certificate verifying every instance identity document
  GET|PUT /v1/throttle                 {"disabled":false,"buckets":{"CreateTags":{"capacity":100,"refill":10}}}

Scenario format (YAML or JSON; this example is also the default scenario):

`

func run() error {
	fs := flag.NewFlagSet("awssim", flag.ContinueOnError)
	scenarioPath := fs.String("scenario", "", "scenario file (YAML or JSON); default: the built-in example below")
	timeScale := fs.Float64("time-scale", 1, "simulated seconds per real second (e.g. 10 runs a 10-minute scenario in 1 minute)")
	addr := fs.String("addr", "127.0.0.1:4566", "EC2 API listen address")
	adminAddr := fs.String("admin-addr", "127.0.0.1:4567", `admin API listen address ("off" to disable)`)
	imdsAddr := fs.String("imds-addr", "127.0.0.1", "host the per-instance IMDS listeners bind (one port each)")
	imdsPortBase := fs.Int("imds-port-base", 0, "pin IMDS ports: the n-th instance (from 0, the scenario's first) listens on this port + n (0: free ports)")
	eniLinks := fs.String("eni-links", "", "comma-separated network namespace paths, one per instance in launch order: "+
		"awssim keeps a link carrying each attached ENI's MAC in the instance's namespace, which an agent run by hand "+
		"waits for (there is no data plane here; the demo has one)")
	imdsLag := fs.Duration("imds-lag", 0, "IMDS lag behind EC2 in simulated time (0: the scenario's, default 1s; negative: none)")
	detachDelay := fs.Duration("detach-delay", 0, "time an ENI stays detaching, simulated (0: the scenario's, default 2s; negative: none)")
	window := fs.Duration("consistency-window", 0, "new ENIs invisible to DescribeNetworkInterfaces, simulated (0: the scenario's, default 0; negative: none)")
	seed := fs.Int64("seed", 0, "seed for IDs, MACs, random addresses and fault draws (0: from the clock)")
	verbose := fs.Bool("v", false, "log every EC2 error and IMDS request (debug level)")
	certOut := fs.String("identity-cert-out", "", "write the PEM certificate that verifies every instance identity document's signature to this file at start (the stand-in for AWS's regional certificate)")
	printScenario := fs.Bool("print-scenario", false, "print the built-in example scenario and exit")
	logFlags := logfmt.RegisterFormat(fs)
	buildinfo.Flag(fs)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprint(out, usageHead)
		fs.PrintDefaults()
		fmt.Fprint(out, usageTail)
		_, _ = out.Write(scenario.Example())
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	if *printScenario {
		_, err := os.Stdout.Write(scenario.Example())
		return err
	}
	lo, err := logFlags.Parse()
	if err != nil {
		return err
	}
	if *verbose {
		lo.Level = slog.LevelDebug
	}
	log := logfmt.New(os.Stderr, lo)

	if *seed == 0 {
		*seed = time.Now().UnixNano()
	}
	sc := scenario.Default()
	if *scenarioPath != "" {
		if sc, err = scenario.Load(*scenarioPath); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sim, err := awssim.Start(ctx, awssim.Config{
		Scenario: sc, TimeScale: *timeScale, Addr: *addr, AdminAddr: *adminAddr, IMDSAddr: *imdsAddr, IMDSPortBase: *imdsPortBase,
		IMDSLag: *imdsLag, DetachDelay: *detachDelay, ConsistencyWindow: *window, Seed: *seed, Logger: log,
	})
	if err != nil {
		return err
	}
	defer sim.Close()
	if *eniLinks != "" {
		closeLinks, err := startENILinks(sim, *eniLinks, log)
		if err != nil {
			return err
		}
		defer closeLinks()
	}
	if *certOut != "" {
		pem, err := sim.IdentityCertificatePEM()
		if err != nil {
			return err
		}
		if err := os.WriteFile(*certOut, pem, 0o644); err != nil {
			return fmt.Errorf("--identity-cert-out: %w", err)
		}
	}
	// One machine-readable line for scripts: endpoints and instances.
	type inst struct {
		ID   string `json:"id"`
		IMDS string `json:"imds"`
	}
	var insts []inst
	for _, i := range sim.World().Instances() {
		u, _ := sim.IMDSEndpoint(i.ID)
		insts = append(insts, inst{i.ID, u})
	}
	line, _ := json.Marshal(map[string]any{"ec2": sim.EC2Endpoint(), "admin": sim.AdminEndpoint(), "instances": insts})
	fmt.Println(string(line))
	<-ctx.Done()
	log.Info("awssim stopping")
	return nil
}

// startENILinks keeps ENI links for the first instances in the given
// namespaces; the returned func removes them.
func startENILinks(sim *awssim.Sim, paths string, log *slog.Logger) (func(), error) {
	insts := sim.World().Instances()
	assign := map[string]string{}
	for i, p := range strings.Split(paths, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if i >= len(insts) {
			return nil, fmt.Errorf("--eni-links names %d namespaces; the scenario has %d instances", i+1, len(insts))
		}
		assign[insts[i].ID] = p
	}
	l := enilinks.New(assign, log.With("component", "enilinks"))
	remove := sim.World().AddHooks(l)
	if err := l.Sync(insts); err != nil {
		remove()
		_ = l.Close()
		return nil, fmt.Errorf("--eni-links: %w", err)
	}
	return func() {
		remove()
		if err := l.Close(); err != nil {
			log.Warn("remove ENI links", "err", err)
		}
	}, nil
}
