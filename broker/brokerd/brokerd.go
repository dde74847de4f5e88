// Package brokerd assembles one broker replica: etcd (external or
// embedded), the store, the EC2 client and its rate limiter, leader
// election, the gRPC server, and on the leader the engine and the
// reconciler. allot-broker, the end-to-end harness, the benchmark and the
// tests all build their broker here, so they run the same wiring.
package brokerd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/allotnet/allot/broker/check"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/instanceview"
	"github.com/allotnet/allot/broker/leader"
	"github.com/allotnet/allot/broker/metrics"
	"github.com/allotnet/allot/broker/nodelog"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/reconciler"
	"github.com/allotnet/allot/broker/server"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Broker is one assembled replica. New builds it and binds its listener;
// Run serves and campaigns until its context ends; Close releases etcd.
type Broker struct {
	cfg  Config
	log  *slog.Logger
	st   *store.Store
	ec2  *ec2client.Client
	el   *leader.Elector
	srv  *server.Server
	view *instanceview.Cache // EC2's word on the nodes' instances
	lis  net.Listener
	etcd func() // closes what openEtcd opened

	mu  sync.Mutex
	eng *executor.Engine // of the latest term; nil before the first
	rec *reconciler.Reconciler
}

// New opens etcd and the store, builds the EC2 client, the elector and the
// gRPC server, and binds the listen address. Nothing runs until Run.
func New(ctx context.Context, cfg Config) (b *Broker, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	// Every line naming an instance also names its Kubernetes node, once
	// the server's view of the node records is up.
	names := &nodelog.Names{}
	log := slog.New(names.Handler(cfg.Logger.Handler()))
	b = &Broker{cfg: cfg, log: log}
	var dial []grpc.DialOption
	if cfg.Meter != nil {
		if dial, err = metrics.EtcdDialOptions(cfg.Meter); err != nil {
			return nil, err
		}
	}
	cli, closeEtcd, err := openEtcd(ctx, cfg.Etcd, "allot-"+cfg.Cluster, dial, log)
	if err != nil {
		return nil, err
	}
	b.etcd = closeEtcd
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	if b.st, err = store.Open(cli, cfg.Cluster); err != nil {
		return nil, err
	}
	// Adapt: the buckets learn when EC2 throttles harder than the model
	// (lower account limits, other tenants).
	lim := ratelimit.New(ratelimit.Config{Share: cfg.EC2.BucketShare, TimeScale: cfg.Clock.Scale(), Adapt: true})
	b.ec2, err = ec2client.New(ctx, ec2client.Config{
		Region: cfg.EC2.Region, Endpoint: cfg.EC2.Endpoint, Credentials: cfg.EC2.Credentials, Limiter: lim,
		Logger: log.With("component", "ec2client"), Meter: cfg.Meter,
	})
	if err != nil {
		return nil, err
	}
	b.el, err = leader.New(leader.Config{
		Client: cli, Prefix: b.st.Prefix(), Name: cfg.Name, TTL: cfg.ElectionTTL, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	if cfg.Meter != nil {
		if err := metrics.Register(cfg.Meter, metrics.Sources{Limiter: lim, Leader: b.el, State: b.st,
			Engine: b.engineStats, Drift: b.drift}); err != nil {
			return nil, err
		}
	}
	if err := b.buildServer(cli); err != nil {
		return nil, err
	}
	names.Use(b.srv.NodeName)
	if b.lis, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	return b, nil
}

// buildServer builds the gRPC server: the broker's services, with
// attestation and role checks first of the interceptors when Auth is set.
func (b *Broker) buildServer(cli *clientv3.Client) error {
	cfg := b.cfg
	b.view = instanceview.New(b.ec2, 0, nil)
	unary, stream := cfg.GRPC.Unary, cfg.GRPC.Stream
	var authSvc allotv1.AuthServiceServer
	if cfg.Auth != nil {
		z, svc, err := b.buildAuth(cli, b.view)
		if err != nil {
			return err
		}
		// Authorization runs first of the caller's interceptors, so nothing
		// else sees a call it refuses.
		unary = append([]grpc.UnaryServerInterceptor{z.UnaryServerInterceptor()}, unary...)
		stream = append([]grpc.StreamServerInterceptor{z.StreamServerInterceptor()}, stream...)
		authSvc = svc
	}
	var err error
	b.srv, err = server.New(server.Config{
		Store: b.st, Leader: b.el, Checker: b.checker(), Logger: b.log, NodeTTL: cfg.NodeTTL, Coalesce: cfg.Coalesce,
		RecentLogs:         cfg.RecentLogs,
		MaxAgentCalls:      cfg.MaxAgentCalls,
		Instances:          b.view,
		InstanceTypes:      b.ec2,
		Subnets:            b.ec2,
		ServerOptions:      cfg.GRPC.Options,
		UnaryInterceptors:  unary,
		StreamInterceptors: stream,
	})
	if err != nil {
		return err
	}
	if authSvc != nil {
		allotv1.RegisterAuthServiceServer(b.srv.GRPC(), authSvc)
	}
	return nil
}

// checker answers AdminService.Check. Its reconciler only compares; the
// leader's own, in lead, is the one that repairs.
func (b *Broker) checker() *check.Checker {
	rec := reconciler.New(reconciler.Config{
		Cluster: b.cfg.Cluster, Store: b.st, EC2: b.ec2, Logger: b.log.With("component", "check"),
	})
	return check.New(rec, b.st, b.cfg.Name, nil)
}

// engineStats is the engine of the latest term, for the metrics; nil
// before the first.
func (b *Broker) engineStats() metrics.Engine {
	if e := b.Engine(); e != nil {
		return e
	}
	return nil
}

// drift is the reconciler of the latest term, for the metrics; nil before
// the first.
func (b *Broker) drift() metrics.Drift {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rec == nil {
		return nil
	}
	return b.rec
}

// Serving reports whether the replica serves: it reaches etcd (its gRPC
// health service says SERVING).
func (b *Broker) Serving() bool { return b.srv.Serving() }

// Addr is the address the gRPC server listens on.
func (b *Broker) Addr() string { return b.lis.Addr().String() }

// Store is the broker's etcd store.
func (b *Broker) Store() *store.Store { return b.st }

// RefusedCalls is how many agent calls the server refused as busy since
// it started.
func (b *Broker) RefusedCalls() int64 { return b.srv.RefusedCalls() }

// EC2 is the broker's EC2 client (its call counters).
func (b *Broker) EC2() *ec2client.Client { return b.ec2 }

// Elector is the replica's leader election.
func (b *Broker) Elector() *leader.Elector { return b.el }

// Engine is the engine of the latest term this replica led (its counters),
// nil before the first.
func (b *Broker) Engine() *executor.Engine {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.eng
}

// Run serves gRPC and campaigns for the lead until ctx ends or the server
// fails, then shuts down in order: stop serving, so no agent writes into a
// store we are leaving; then resign, so a standby leads at once. Close
// releases etcd afterwards.
func (b *Broker) Run(ctx context.Context) error {
	serveErr := make(chan error, 1)
	go func() { serveErr <- b.srv.Serve(b.lis) }()
	b.log.Info("serving gRPC", "addr", b.Addr(), "replica", b.cfg.Name, "cluster", b.cfg.Cluster)

	electCtx, stopElect := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElect()
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		_ = b.el.Run(electCtx, b.lead)
	}()

	var err error
	select {
	case <-ctx.Done():
		b.log.Info("shutting down", "cause", context.Cause(ctx))
	case err = <-serveErr:
		b.log.Error("gRPC server stopped", "err", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), b.cfg.ShutdownTimeout)
	defer cancel()
	b.srv.Stop(sctx)
	stopElect()
	select {
	case <-elected:
	case <-sctx.Done():
		b.log.Warn("leader work did not stop in time")
	}
	return err
}

// Close releases etcd (and the listener, if Run never ran). Call it after
// Run has returned.
func (b *Broker) Close() {
	if b.lis != nil {
		if err := b.lis.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			b.log.Debug("closing listener", "err", err)
		}
	}
	if b.etcd != nil {
		b.etcd()
		b.etcd = nil
	}
}
