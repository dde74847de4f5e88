// Package server is the broker's gRPC surface: NodeService for agents,
// BudgetService for capacity planners and AdminService for operators, with
// the standard health service and reflection. It keeps no state of its own:
// every answer is read from etcd, directly or through a copy kept current
// by an etcd watch (see hub), so any replica, leader or standby, serves
// every client; only the leader runs the engine.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// Config configures a Server. Store is required; the rest have defaults.
type Config struct {
	Store   Store
	Leader  LeaderInfo   // for GetStatus; nil reports no leader
	Limits  LimitsSource // for Register; nil leaves limits to the engine
	Checker Checker      // for Check; nil answers Unimplemented
	// RecentLogs holds the replica's latest log records for GetLogs
	// (logring.Ring); nil answers Unimplemented.
	RecentLogs RecentLogs
	// InstanceTypes answers GetMaxPods; nil answers Unimplemented.
	InstanceTypes InstanceTypes
	// Subnets checks the subnets of a pod network before SetPodNetwork
	// stores it; nil answers SetPodNetwork with Unimplemented.
	Subnets Subnets
	// Instances, if set, is EC2's word on each node's instance: Register
	// refuses claims that disagree with it and records EC2's values.
	Instances InstanceFacts
	Logger    *slog.Logger // nil: slog.Default()
	// NodeTTL is the liveness lease a Heartbeat renews; 30s if zero.
	NodeTTL time.Duration
	// Coalesce is how long the watch streams let a burst of changes settle
	// before the nodes it touched are recomputed once; 50ms if zero.
	Coalesce time.Duration
	// Resync re-reads the whole state the watch streams follow even without
	// a change; 5m if zero. The watch is revision-continuous and a break in
	// it reads everything anyway, so this only guards against a change the
	// hub mishandled; every resync reads every record and recomputes every
	// node's state, which at thousands of nodes is not free.
	Resync time.Duration
	// MaxAgentCalls bounds the agents' calls that read or write etcd the
	// server runs at once (callGate); a call beyond it is refused at once
	// with codes.Unavailable and the agent retries with backoff.
	// DefaultMaxAgentCalls if zero; negative leaves only the bound of one
	// call of each kind per node.
	MaxAgentCalls int
	// HealthInterval is how often etcd reachability is checked for the
	// health service; 5s if zero.
	HealthInterval time.Duration
	// ServerOptions are added to the grpc.Server's (e.g. TLS credentials).
	ServerOptions []grpc.ServerOption
	// UnaryInterceptors and StreamInterceptors run after logging and
	// recovery and before validation and the handler: where
	// authentication and authorisation go. Their errors pass the same
	// domain-error table as the handlers'.
	UnaryInterceptors  []grpc.UnaryServerInterceptor
	StreamInterceptors []grpc.StreamServerInterceptor
	// Now is the clock for record timestamps; time.Now if nil.
	Now func() time.Time
}

// Server is the broker's gRPC server.
type Server struct {
	cfg    Config
	grpc   *grpc.Server
	health *health.Server
	hub    *hub
	gate   *callGate
	cancel context.CancelFunc
	done   chan struct{}
}

// serviceNames are the names the health service reports on, besides "".
var serviceNames = []string{
	allotv1.NodeService_ServiceDesc.ServiceName,
	allotv1.BudgetService_ServiceDesc.ServiceName,
	allotv1.AdminService_ServiceDesc.ServiceName,
	allotv1.PodNetworkService_ServiceDesc.ServiceName,
}

// New builds the server and starts its background loops (watch fan-out,
// health). Call Serve, then Stop.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("server: store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.NodeTTL <= 0 {
		cfg.NodeTTL = 30 * time.Second
	}
	if cfg.Coalesce <= 0 {
		cfg.Coalesce = 50 * time.Millisecond
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 5 * time.Minute
	}
	if cfg.HealthInterval <= 0 {
		cfg.HealthInterval = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxAgentCalls == 0 {
		cfg.MaxAgentCalls = DefaultMaxAgentCalls
	}
	log := cfg.Logger.With("component", "grpc")

	gate := newCallGate(cfg.MaxAgentCalls, log, time.Now)
	unary := append(slices.Clip(cfg.UnaryInterceptors), gate.unary)
	opts := append(serverOptions(log, unary, cfg.StreamInterceptors), cfg.ServerOptions...)
	gs := grpc.NewServer(opts...)
	h := newHub(cfg.Store, log, cfg.Coalesce, cfg.Resync)
	allotv1.RegisterNodeServiceServer(gs, &nodeService{
		st: cfg.Store, limits: cfg.Limits, facts: cfg.Instances, hub: h, nodeTTL: cfg.NodeTTL, now: cfg.Now, log: log,
		demands: &demandWriter{st: cfg.Store},
	})
	allotv1.RegisterBudgetServiceServer(gs, &budgetService{st: cfg.Store, hub: h, log: log, types: cfg.InstanceTypes})
	allotv1.RegisterAdminServiceServer(gs, &adminService{st: cfg.Store, leader: cfg.Leader, checker: cfg.Checker, logs: cfg.RecentLogs})
	allotv1.RegisterPodNetworkServiceServer(gs, &podNetworkService{st: cfg.Store, subnets: cfg.Subnets, log: log})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)

	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, grpc: gs, health: hs, hub: h, gate: gate, cancel: cancel, done: make(chan struct{})}
	s.setServing(false)
	go h.run(ctx)
	go func() {
		defer close(s.done)
		s.watchHealth(ctx)
	}()
	return s, nil
}

// RefusedCalls is how many agent calls the server refused as busy
// (MaxAgentCalls, or an earlier call of the same kind of the node still in
// progress) since it started.
func (s *Server) RefusedCalls() int64 { return s.gate.Refused() }

// GRPC returns the underlying server, to register more services.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// Serve accepts connections on lis until Stop.
func (s *Server) Serve(lis net.Listener) error {
	if err := s.grpc.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serve gRPC on %s: %w", lis.Addr(), err)
	}
	return nil
}

// Stop reports NOT_SERVING, ends the watch streams (their clients reconnect,
// perhaps to another replica), lets unary calls finish until ctx ends, then
// closes every connection.
func (s *Server) Stop(ctx context.Context) {
	s.health.Shutdown()
	s.cancel()
	<-s.done
	<-s.hub.done
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		s.grpc.Stop()
		<-stopped
	}
}

// watchHealth sets the health status from etcd reachability: a replica that
// cannot read etcd cannot answer anything truthfully.
func (s *Server) watchHealth(ctx context.Context) {
	t := time.NewTicker(s.cfg.HealthInterval)
	defer t.Stop()
	serving := false
	for {
		cctx, cancel := context.WithTimeout(ctx, min(s.cfg.HealthInterval, 3*time.Second))
		_, err := s.cfg.Store.Revision(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if ok := err == nil; ok != serving {
			serving = ok
			s.setServing(ok)
			if ok {
				s.cfg.Logger.Info("etcd reachable: serving")
			} else {
				s.cfg.Logger.Warn("etcd unreachable: not serving", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) setServing(ok bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ok {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	for _, n := range serviceNames {
		s.health.SetServingStatus(n, st)
	}
}

// Serving reports what the gRPC health service says: whether this replica
// reaches etcd and so can serve (Kubernetes' readiness).
func (s *Server) Serving() bool {
	r, err := s.health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	return err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING
}

// NodeName is the Kubernetes name the node with this instance ID
// registered with, as this replica's view of etcd has it; "" if none.
func (s *Server) NodeName(instanceID string) string {
	if ns, _ := s.hub.node(instanceID); ns != nil {
		return ns.name
	}
	return ""
}

func isNotFound(err error) bool { return errors.Is(err, rpcerr.ErrNotFound) }
