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
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/allotnet/allot/broker/etcdembed"
	"github.com/allotnet/allot/broker/leader"
	"github.com/allotnet/allot/broker/server"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/logfmt"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

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
	log := logfmt.New(os.Stderr, cfg.log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("allot-broker failed", "err", err)
		os.Exit(1)
	}
	log.Info("allot-broker stopped")
}

// run starts everything, waits for ctx to end, and shuts down in order.
func run(ctx context.Context, cfg config, log *slog.Logger) error {
	cli, closeEtcd, err := openEtcd(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeEtcd()

	st, err := store.Open(cli, cfg.cluster)
	if err != nil {
		return err
	}
	work, err := leaderWork(ctx, cfg, st, log)
	if err != nil {
		return err
	}
	el, err := leader.New(leader.Config{
		Client: cli, Prefix: st.Prefix(), Name: cfg.name, TTL: cfg.electionTTL, Logger: log,
	})
	if err != nil {
		return err
	}

	var opts []grpc.ServerOption
	tlsCfg, err := serverTLS(cfg)
	if err != nil {
		return err
	}
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	srv, err := server.New(server.Config{
		Store: st, Leader: el, Logger: log, NodeTTL: cfg.nodeTTL, ServerOptions: opts,
	})
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.listen, err)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	log.Info("serving gRPC", "addr", lis.Addr().String(), "replica", cfg.name, "version", buildinfo.Get().Version, "cluster", cfg.cluster,
		"tls", tlsCfg != nil, "mtls", cfg.tlsClientCA != "")

	electCtx, stopElect := context.WithCancel(context.WithoutCancel(ctx))
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		_ = el.Run(electCtx, work)
	}()

	select {
	case <-ctx.Done():
		log.Info("shutting down", "cause", context.Cause(ctx))
	case err = <-serveErr:
		log.Error("gRPC server stopped", "err", err)
	}
	// Stop serving first, so no agent writes into a store we are leaving;
	// then resign, so a standby leads at once; etcd closes last (deferred).
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	srv.Stop(sctx)
	stopElect()
	select {
	case <-elected:
	case <-sctx.Done():
		log.Warn("leader work did not stop in time")
	}
	return err
}

// openEtcd connects to the external etcd, or starts the embedded one. The
// returned func closes the client and then the embedded server.
func openEtcd(ctx context.Context, cfg config, log *slog.Logger) (*clientv3.Client, func(), error) {
	if len(cfg.etcdEndpoints) > 0 {
		tlsCfg, err := etcdTLS(cfg)
		if err != nil {
			return nil, nil, err
		}
		cli, err := clientv3.New(clientv3.Config{
			Endpoints: cfg.etcdEndpoints, TLS: tlsCfg, DialTimeout: 10 * time.Second,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("connect to etcd %v: %w", cfg.etcdEndpoints, err)
		}
		log.Info("using external etcd", "endpoints", cfg.etcdEndpoints)
		return cli, func() { _ = cli.Close() }, nil
	}
	if err := os.MkdirAll(cfg.dataDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("create data directory: %w", err)
	}
	e, err := etcdembed.Start(ctx, etcdembed.Config{Dir: cfg.dataDir, Logger: log.With("component", "etcd")})
	if err != nil {
		return nil, nil, err
	}
	cli, err := e.Client()
	if err != nil {
		e.Close()
		return nil, nil, err
	}
	log.Info("using embedded etcd", "dir", cfg.dataDir, "endpoints", e.Endpoints())
	return cli, func() {
		_ = cli.Close()
		e.Close()
	}, nil
}
