// Command allot-broker is allot's cluster-wide broker: the only component
// that calls EC2. Every replica serves agents, capacity planners and
// allotctl over gRPC from the state in etcd; the replica elected leader also
// runs the engine that plans, rate-limits and carries out EC2 calls.
//
// With --etcd-endpoints it uses an external etcd cluster; without, it runs
// an embedded single-member etcd in --data-dir (the one-machine default).
// SIGINT or SIGTERM stops it gracefully: stop serving, resign the lead,
// close etcd.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	// Mozilla's roots, used only when the system has none: the broker's
	// image holds no CA bundle, and EC2 and STS are reached over TLS.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/allotnet/allot/broker/auth"
	"github.com/allotnet/allot/broker/brokerd"
	"github.com/allotnet/allot/broker/clock"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/server"
	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/logfmt"
	"github.com/allotnet/allot/internal/logring"
	"github.com/allotnet/allot/internal/telemetry/traceconf"
)

// logFlushWait bounds how long a stopping process waits for the log lines
// it still holds to be written.
const logFlushWait = 2 * time.Second

func main() {
	if buildinfo.PrintIfRequested("allot-broker", os.Args[1:], os.Stdout) {
		return
	}
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "allot-broker: %v\n", err)
		}
		os.Exit(2)
	}
	if cfg.trace, err = traceconf.TraceConfigFromEnv(os.LookupEnv, "allot-broker"); err != nil {
		fmt.Fprintf(os.Stderr, "allot-broker: %v\n", err)
		os.Exit(2)
	}
	// The latest records also stay in memory, for an admin's support
	// bundle (AdminService GetLogs).
	recent := logring.New(2000)
	// Lines pass to stderr from a goroutine of their own: a slow reader of
	// the log must not stall the goroutines that log (logfmt.AsyncWriter).
	logOut := logfmt.Async(os.Stderr, 0)
	log := logring.Tee(logfmt.New(logOut, cfg.log), recent, cfg.log.Level)
	limit, source := cfg.memLimit.apply(os.Getenv, cgroupMemoryLimit)
	log.Info("Go runtime memory limit", "bytes", limit, "source", source,
		"gc_percent", brokerd.SetGCPercent(cfg.gcPercent, os.Getenv("GOGC")))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log, recent); err != nil {
		log.Error("allot-broker failed", "err", err)
		logOut.Close(logFlushWait)
		os.Exit(1)
	}
	log.Info("allot-broker stopped")
	logOut.Close(logFlushWait)
}

// run builds the broker from the flags, runs it until ctx ends, and closes
// etcd last.
func run(ctx context.Context, cfg config, log *slog.Logger, recent *logring.Ring) error {
	obs, err := startObservability(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer obs.close()
	// The metrics listener comes first: its /healthz (liveness) must answer
	// while this member waits for an etcd quorum, which can take as long as
	// the other replicas do; /readyz answers once the broker serves.
	var built atomic.Pointer[brokerd.Broker]
	if err := obs.serve(cfg.metricsAddr, func() bool { b := built.Load(); return b != nil && b.Serving() }); err != nil {
		return err
	}
	bc, err := brokerConfig(ctx, cfg, log)
	if err != nil {
		return err
	}
	bc.Meter, bc.RecentLogs = obs.meter, recent
	b, err := brokerd.New(ctx, bc)
	if err != nil {
		return err
	}
	defer b.Close()
	built.Store(b)
	log.Info("allot-broker starting", "replica", cfg.name, "version", buildinfo.Get().Version, "cluster", cfg.cluster,
		"tls", cfg.tlsCert != "", "client_certificates", cfg.tlsClientCA != "", "attestation", cfg.identityCert != "")
	return b.Run(ctx)
}

// brokerConfig turns the flags into the broker's config: TLS files read,
// AWS region and credentials resolved.
func brokerConfig(ctx context.Context, cfg config, log *slog.Logger) (brokerd.Config, error) {
	bc := brokerd.Config{
		Name: cfg.name, Cluster: cfg.cluster, Listen: cfg.listen,
		Etcd: brokerd.EtcdConfig{Endpoints: cfg.etcdEndpoints, DataDir: cfg.dataDir, Member: brokerd.EtcdMember{
			Name: cfg.etcd.name, PeerURL: cfg.etcd.peerURL, ClientURL: cfg.etcd.clientURL,
			InitialCluster: cfg.etcd.initialCluster, State: cfg.etcd.clusterState, PeerTLS: cfg.etcd.peerTLS(),
		}},
		EC2: brokerd.EC2Config{
			Region: cfg.ec2Region, Endpoint: cfg.ec2Endpoint, BucketShare: cfg.bucketShare,
		},
		Engine:          executor.Config{Gather: cfg.gather, GatherMax: cfg.gatherMax, NewENILag: newENILag(cfg.newENILag), PlanPolicy: cfg.planPolicy},
		PodSubnets:      cfg.podSubnets,
		ElectionTTL:     cfg.electionTTL,
		NodeTTL:         cfg.nodeTTL,
		MaxAgentCalls:   cfg.maxAgentCalls,
		ShutdownTimeout: cfg.shutdownTimeout,
		Logger:          log,
	}
	var err error
	if bc.Clock, err = clock.Scaled(cfg.timeScale); err != nil {
		return bc, fmt.Errorf("--time-scale: %w", err)
	}
	if bc.Etcd.TLS, err = etcdTLS(cfg); err != nil {
		return bc, err
	}
	tlsCfg, err := serverTLS(cfg)
	if err != nil {
		return bc, err
	}
	if tlsCfg != nil {
		bc.GRPC.Options = append(bc.GRPC.Options, server.TLS(tlsCfg)...)
	}
	if bc.Auth, err = authConfig(cfg); err != nil {
		return bc, err
	}
	if cfg.insecure {
		log.Warn("serving in plaintext without authentication: anyone who reaches this address can make the broker call EC2",
			"listen", cfg.listen, "flag", "--"+insecureFlag)
	}
	if bc.EC2.Region, bc.EC2.Credentials, err = awsSettings(ctx, cfg); err != nil {
		return bc, err
	}
	log.Info("EC2 settings", "region", bc.EC2.Region, "endpoint", cfg.ec2Endpoint)
	return bc, nil
}

// authConfig is nil (anyone may call) only with the insecure flag.
func authConfig(cfg config) (*brokerd.AuthConfig, error) {
	if cfg.insecure {
		return nil, nil
	}
	ac := &brokerd.AuthConfig{AccountID: cfg.attestAccount, VPCIDs: cfg.attestVPCs, TokenTTL: cfg.nodeTokenTTL}
	if cfg.identityCert != "" {
		certs, err := auth.LoadCertificates(cfg.identityCert)
		if err != nil {
			return nil, fmt.Errorf("--identity-cert: %w", err)
		}
		ac.IdentityCertificates = certs
	}
	return ac, nil
}

// newENILag maps the flag's 0 (none) to the engine's negative (none); the
// engine reads 0 as its default.
func newENILag(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
