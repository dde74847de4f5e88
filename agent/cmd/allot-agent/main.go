// Command allot-agent is allot's node agent: it keeps the node's warm pool
// of VPC addresses (supplied by the broker), wires pods with netlink, and
// answers the allot CNI plugin on a unix socket.
//
// The IMDS endpoint has no default: pass --imds-endpoint=http://169.254.169.254
// on EC2 (and an awssim address in tests and demos). SIGINT or SIGTERM stops
// it gracefully: the socket stops taking calls, calls in flight finish,
// state is already on disk.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/agent/hostnet"
	"github.com/allotnet/allot/agent/identity"
	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/logfmt"
	"github.com/allotnet/allot/internal/logring"
	"github.com/allotnet/allot/internal/telemetry/tracing"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// logFlushWait bounds how long a stopping process waits for the log lines
// it still holds to be written.
const logFlushWait = 2 * time.Second

func main() {
	if buildinfo.PrintIfRequested("allot-agent", os.Args[1:], os.Stdout) {
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "bundle" {
		os.Exit(runBundle(os.Args[2:], os.Stdout, os.Stderr))
	}
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "allot-agent: %v\n", err)
		}
		os.Exit(2)
	}
	setMemory(cfg.memoryLimitMiB, os.Getenv("GOMEMLIMIT"), cfg.gcPercent, os.Getenv("GOGC"))
	// The latest records also stay in memory for /v1/logs and the
	// support bundle.
	recent := logring.New(2000)
	// Lines pass to stderr from a goroutine of their own: a slow reader of
	// the log must not stall the goroutines that log (logfmt.AsyncWriter).
	logOut := logfmt.Async(os.Stderr, 0)
	log := logring.Tee(logfmt.New(logOut, cfg.log), recent, cfg.log.Level)
	if cfg.agent.NodeName != "" {
		log = log.With("k8s_node", cfg.agent.NodeName)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log, recent); err != nil {
		log.Error("allot-agent failed", "err", err)
		logOut.Close(logFlushWait)
		os.Exit(1)
	}
	log.Info("allot-agent stopped")
	logOut.Close(logFlushWait)
}

// run builds the agent's dependencies from cfg and runs it until ctx ends.
func run(ctx context.Context, cfg config, log *slog.Logger, recent *logring.Ring) error {
	tr, err := tracing.NewTracing(ctx, cfg.trace)
	if err != nil {
		return err
	}
	defer flushTraces(tr, log)
	tracing.Install(tr)
	imds, err := identity.NewClient(cfg.imdsEndpoint)
	if err != nil {
		return err
	}
	netw, err := hostnet.New(hostnet.Config{NodeNetNS: cfg.nodeNetNS, ProcSys: cfg.procSys, Logger: log.With("component", "hostnet")})
	if err != nil {
		return fmt.Errorf("open host network: %w", err)
	}
	defer netw.Close()
	conn, err := connectBroker(cfg, imds, log)
	if err != nil {
		return err
	}
	defer conn.Close()
	if cfg.brokerCA == "" {
		log.Warn("talking to the broker in plaintext; use --broker-ca (and --broker-cert) outside tests")
	}
	deps := daemon.Deps{
		IMDS:       imds,
		Network:    netw,
		Broker:     allotv1.NewNodeServiceClient(conn),
		Logger:     log,
		RecentLogs: recent,
	}
	// The CNI plugin's spans go out with the agent's, to its collector.
	if f := tr.Forwarder(); f != nil {
		deps.PluginSpans = f
	}
	agent, err := daemon.New(cfg.agent, deps)
	if err != nil {
		return err
	}
	log.Info("allot-agent starting", "version", buildinfo.Get().Version, "imds", cfg.imdsEndpoint, "brokers", cfg.brokers, "mode", cfg.agent.Mode,
		"checkpoint", cfg.agent.CheckpointPath, "socket", cfg.agent.SocketPath)
	return agent.Run(ctx)
}

// flushTraces exports the spans still buffered, bounded so a collector that
// is down cannot hold the stop.
func flushTraces(t *tracing.Tracing, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("traces not flushed", "err", err)
	}
}
