// Package daemon is the node agent's core: it restores the warm pool from
// the checkpoint, learns the node from IMDS, restores the host network of
// recorded pods, and answers the CNI plugin (it is the cniserver Backend)
// from the pool, while brokerlink keeps the pool supplied. It is a library
// with its dependencies passed in (Deps), so the burst benchmark can run
// hundreds of agents in one process with the host network replaced by a
// recorder; cmd/allot-agent is the thin main.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/allotnet/allot/agent/brokerlink"
	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/hostnet"
	"github.com/allotnet/allot/agent/identity"
	"github.com/allotnet/allot/agent/introspect"
	"github.com/allotnet/allot/agent/pool"
	"github.com/allotnet/allot/internal/telemetry"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Deps are the agent's boundaries, each an interface so that tests and the
// benchmark substitute their own.
type Deps struct {
	// IMDS is the instance metadata client (identity.NewClient).
	IMDS identity.MetadataAPI
	// Network is the host network (hostnet.Linux, or hostnettest.Recorder).
	Network hostnet.Network
	// Broker is the broker's NodeService client.
	Broker allotv1.NodeServiceClient
	// Clock measures cooldowns and stamps allocations; nil is the wall
	// clock.
	Clock pool.Clock
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// RecentLogs, if set, holds the agent's latest log records for
	// introspection's /v1/logs (logring.Ring).
	RecentLogs interface{ Lines() []byte }
	// Tracer makes the agent's own spans; nil is the process's global
	// provider.
	Tracer trace.TracerProvider
	// PluginSpans exports the spans the CNI plugin hands the agent (it has
	// no exporter of its own); nil drops them, and the plugin is told so.
	PluginSpans cniserver.SpanSink
}

// Agent is one node's agent. Its CNI methods (Add, Del, Check, GC, Status)
// are safe for concurrent use once Start has returned.
type Agent struct {
	cfg   Config
	deps  Deps
	log   *slog.Logger
	clock pool.Clock
	ckpt  *checkpoint.File
	net   hostnet.Network

	// Set by Start.
	pool    *pool.Pool
	link    *brokerlink.Link
	arrival *arrival
	ident   identity.Identity
	// ready gates the CNI methods; up is set once Start has finished
	// (after the DEL queue replay, which needs the CNI methods).
	ready atomic.Bool
	up    atomic.Bool

	keys keyLocks
	// waiting holds the traces of ADDs that hold no address yet.
	waiting waiters
	// netMu lets pod setup and teardown run together (read side) but not
	// while GC reconciles the host against the records (write side):
	// Reconcile would restore a pod being torn down, or call one being set
	// up stray.
	netMu sync.RWMutex
	// netSlots bounds the pod network work in flight (netslots.go).
	netSlots netSlots
	// teardowns are the answered DELs' teardowns still running, and
	// heldTeardowns those that failed (teardown.go).
	teardowns     sync.WaitGroup
	heldTeardowns heldTeardowns
	// wrapStore, when set before Start, wraps the pool's checkpoint
	// writes (tests hold them with it).
	wrapStore func(pool.Persister) pool.Persister

	metrics  *telemetry.Metrics
	tel      *instruments
	started  sync.Once
	startErr error
}

var _ cniserver.Backend = (*Agent)(nil)

// New checks cfg and returns an agent; nothing is read or changed until
// Start.
func New(cfg Config, deps Deps) (*Agent, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	if deps.IMDS == nil || deps.Network == nil || deps.Broker == nil {
		return nil, errors.New("agent: IMDS, Network and Broker dependencies are required")
	}
	if deps.Clock == nil {
		deps.Clock = pool.RealClock
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Agent{
		cfg: cfg, deps: deps, log: deps.Logger.With("component", "agent"), clock: deps.Clock,
		ckpt: checkpoint.New(cfg.CheckpointPath).WithLogger(deps.Logger), net: deps.Network, netSlots: newNetSlots(),
	}
	a.keys.init()
	var meter metric.Meter = noop.NewMeterProvider().Meter(meterName)
	if cfg.IntrospectAddr != "" || cfg.MetricsAddr != "" {
		if a.metrics, err = telemetry.NewMetrics(); err != nil {
			return nil, err
		}
		meter = a.metrics.Meter(meterName)
	}
	if a.tel, err = newTelemetry(meter, a); err != nil {
		return nil, err
	}
	return a, nil
}

// Pool returns the agent's pool (nil before Start).
func (a *Agent) Pool() *pool.Pool { return a.pool }

// Identity returns the node's identity as read at Start.
func (a *Agent) Identity() identity.Identity { return a.ident }

// BrokerStatus returns the broker link's state (zero before Start).
func (a *Agent) BrokerStatus() brokerlink.Status {
	if a.link == nil {
		return brokerlink.Status{}
	}
	return a.link.Status()
}

// Ready reports whether Start completed and CNI requests are served.
func (a *Agent) Ready() bool { return a.up.Load() }

// Run starts the agent if Start was not called, then talks to the broker,
// serves the CNI socket and introspection (when configured) and replays the
// plugin's DEL queue periodically, until ctx ends. It then stops serving,
// letting calls in flight finish (bounded), and returns.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.Start(ctx); err != nil {
		return err
	}
	// Last, once nothing else writes: the checkpoint left as one whole
	// record, which an agent rolled back to an older version reads.
	defer func() {
		if err := a.ckpt.Close(); err != nil {
			a.log.Warn("checkpoint left with its changes; an older agent version would refuse it", "err", err)
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer a.arrival.wait() // after cancel, below
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.arrival.start(runCtx)
	wg.Go(func() { _ = a.link.Run(runCtx) })

	var g *cniserver.Mux
	if a.cfg.SocketPath != "" {
		lis, err := cniserver.Listen(a.cfg.SocketPath)
		if err != nil {
			return err
		}
		// The ADD's span; a plugin that sends trace context is its parent.
		gs := grpc.NewServer(grpc.StatsHandler(otelgrpc.NewServerHandler()))
		srv := cniserver.New(a, a.deps.Logger.With("component", "cniserver"))
		if a.deps.PluginSpans != nil {
			srv.ExportPluginSpans(a.deps.PluginSpans)
		}
		srv.Register(gs)
		// The plugin's own wire and gRPC on the one socket.
		g = cniserver.NewMux(lis, gs, srv)
		wg.Go(func() { _ = g.Serve() })
		a.log.Info("serving CNI", "socket", a.cfg.SocketPath)
	}
	intro, scrape, err := a.listenHTTP(&wg)
	if err != nil {
		if g != nil {
			g.Stop()
		}
		return err
	}
	if a.cfg.DelQueueDir != "" {
		wg.Go(func() { a.replayLoop(runCtx) })
	}

	<-ctx.Done()
	a.log.Info("shutting down", "cause", context.Cause(ctx))
	a.shutdown(g, intro, scrape)
	a.teardowns.Wait()
	return nil
}

// repairToken is the token POST /v1/repair requires; empty (repair off)
// without a token file.
func (a *Agent) repairToken() (string, error) {
	if a.cfg.RepairTokenPath == "" {
		return "", nil
	}
	return introspect.LoadOrCreateRepairToken(a.cfg.RepairTokenPath)
}

// listenHTTP serves introspection on its loopback address and metrics
// alone on the scrape address, each when configured.
func (a *Agent) listenHTTP(wg *sync.WaitGroup) (*introspect.Server, *telemetry.Listener, error) {
	var intro *introspect.Server
	if a.cfg.IntrospectAddr != "" {
		tok, err := a.repairToken()
		if err != nil {
			return nil, nil, err
		}
		if intro, err = introspect.Listen(a.cfg.IntrospectAddr, a.source(), a.metrics, tok, a.deps.Logger); err != nil {
			return nil, nil, err
		}
		wg.Go(func() {
			if err := intro.Serve(); err != nil {
				a.log.Error("introspection stopped", "err", err)
			}
		})
		a.log.Info("serving introspection", "addr", intro.Addr())
	}
	if a.cfg.MetricsAddr == "" {
		return intro, nil, nil
	}
	scrape, err := telemetry.Listen(a.cfg.MetricsAddr, telemetry.MetricsHandler(a.metrics, a.up.Load))
	if err != nil {
		if intro != nil {
			_ = intro.Shutdown(context.Background())
		}
		return nil, nil, fmt.Errorf("metrics listener: %w", err)
	}
	wg.Go(func() {
		if err := scrape.Serve(); err != nil {
			a.log.Error("metrics listener stopped", "err", err)
		}
	})
	a.log.Info("serving metrics", "addr", scrape.Addr())
	return intro, scrape, nil
}

// shutdown stops the servers; CNI calls in flight get a bounded time to
// finish (an ADD waiting for capacity may take up to MaxAddWait).
func (a *Agent) shutdown(g *cniserver.Mux, intro *introspect.Server, scrape *telemetry.Listener) {
	grace := a.cfg.MaxAddWait + 5*time.Second
	if g != nil {
		done := make(chan struct{})
		go func() {
			g.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(grace):
			g.Stop()
			<-done
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if intro != nil {
		_ = intro.Shutdown(sctx)
	}
	if scrape != nil {
		_ = scrape.Shutdown(sctx)
	}
	if a.metrics != nil {
		_ = a.metrics.Shutdown(sctx)
	}
}

// replayLoop replays the plugin's DEL queue periodically: a DEL queued
// while the agent was briefly unreachable (a restart) is applied without
// waiting for the next start.
func (a *Agent) replayLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.DelQueueInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.replayDelQueue(ctx)
		}
	}
}

func (a *Agent) replayDelQueue(ctx context.Context) {
	rep, err := cniserver.ReplayDelQueue(ctx, a.cfg.DelQueueDir, a, a.deps.Logger.With("component", "delqueue"))
	if err != nil {
		a.log.Warn("replaying the plugin's DEL queue", "dir", a.cfg.DelQueueDir, "err", err)
		return
	}
	if len(rep.Applied)+rep.Failed+len(rep.Corrupt) > 0 {
		a.log.Info("DEL queue replayed", "applied", len(rep.Applied), "failed", rep.Failed, "corrupt", len(rep.Corrupt))
	}
}
