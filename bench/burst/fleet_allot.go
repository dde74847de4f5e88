package burst

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/allotnet/allot/agent/brokerlink"
	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
	"github.com/allotnet/allot/agent/identity"
	"github.com/allotnet/allot/agent/pool"
	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/cni/plugin"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// allotNode is one node running the real agent.
type allotNode struct {
	inst  awssim.AdminInstance
	agent *daemon.Agent
	rec   *hostnettest.Recorder
	conn  *grpc.ClientConn
}

// allotFleet is every node's agent, each with its own checkpoint, IMDS
// endpoint, hostnet Recorder and gRPC connection to the broker.
type allotFleet struct {
	cfg        Config
	mode       daemon.Mode
	brokerAddr string
	dir        string

	nodes   []*allotNode
	targets pool.Targets
	limits  pool.Limits
	// hotCalls counts broker RPCs made with an ADD's context: calls on the
	// per-pod hot path. The agent makes none by design.
	hotCalls atomic.Int64

	// tls verifies the broker; each agent attests on its own.
	tls credentials.TransportCredentials

	runCtx context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newAllotFleet returns an empty fleet; join adds nodes to it.
func newAllotFleet(ctx context.Context, cfg Config, mode daemon.Mode, brokerAddr, dir, pkiDir string) (*allotFleet, error) {
	tc, err := agentTLS(pkiDir)
	if err != nil {
		return nil, err
	}
	limits, ok := catalogLimits(cfg.InstanceType)
	if !ok {
		return nil, fmt.Errorf("instance type %s: limits unknown to the agent", cfg.InstanceType)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &allotFleet{
		cfg: cfg, mode: mode, brokerAddr: brokerAddr, dir: dir, tls: tc,
		targets: pool.DefaultTargets(mode == daemon.ModePrefix), limits: limits,
		runCtx: runCtx, cancel: cancel,
	}, nil
}

// join starts an agent per instance and returns once every one has
// started (read its identity, restored its empty checkpoint).
func (f *allotFleet) join(ctx context.Context, insts []awssim.AdminInstance) error {
	hot := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if ctx.Value(hotPathKey{}) != nil {
			f.hotCalls.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	nodes := make([]*allotNode, len(insts))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i, inst := range insts {
		g.Go(func() error {
			n, err := startAgent(gctx, f.runCtx, f.cfg, f.mode, inst, f.brokerAddr, filepath.Join(f.dir, inst.ID), hot, f.tls, &f.wg)
			if err != nil {
				return fmt.Errorf("agent %s: %w", inst.ID, err)
			}
			nodes[i] = n
			return nil
		})
	}
	err := g.Wait()
	for _, n := range nodes {
		if n != nil {
			f.nodes = append(f.nodes, n)
		}
	}
	return err
}

func startAgent(ctx, runCtx context.Context, cfg Config, mode daemon.Mode, inst awssim.AdminInstance, brokerAddr, dir string,
	hot grpc.UnaryClientInterceptor, tc credentials.TransportCredentials, wg *sync.WaitGroup) (*allotNode, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	im, err := identity.NewClient(inst.IMDSEndpoint)
	if err != nil {
		return nil, err
	}
	creds, err := agentCredentials(im)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(brokerAddr, append(creds.DialOptions(), grpc.WithTransportCredentials(tc), grpc.WithUnaryInterceptor(hot))...)
	if err != nil {
		return nil, err
	}
	bindAttestation(creds, conn)
	rec := hostnettest.NewRecorder()
	a, err := daemon.New(daemon.Config{
		Mode:           mode,
		CheckpointPath: filepath.Join(dir, "checkpoint.json"),
		// Every agent timer runs on simulated time, like awssim's buckets.
		Cooldown:          cfg.wall(pool.DefaultCooldown),
		MaxAddWait:        cfg.wall(daemon.DefaultMaxAddWait),
		RetryLinger:       cfg.wall(pool.DefaultRetryLinger),
		UsageInterval:     cfg.wall(brokerlink.DefaultUsageInterval),
		HeartbeatInterval: cfg.wall(brokerlink.DefaultHeartbeatInterval),
		ConfirmInterval:   cfg.wall(daemon.DefaultConfirmInterval),
		DemandInterval:    cfg.wall(brokerlink.DefaultDemandInterval),
	}, daemon.Deps{IMDS: im, Network: rec, Broker: allotv1.NewNodeServiceClient(conn), Logger: cfg.Logger.With("node", inst.ID)})
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	if err := a.Start(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	wg.Go(func() {
		if err := a.Run(runCtx); err != nil && runCtx.Err() == nil {
			cfg.Logger.Error("agent stopped", "node", inst.ID, "err", err)
		}
	})
	return &allotNode{inst: inst, agent: a, rec: rec, conn: conn}, nil
}

// warm reports how many nodes still miss their warm targets.
func (f *allotFleet) warmMissing() int {
	missing := 0
	for _, n := range f.nodes {
		p := n.agent.Pool()
		if p == nil || pool.Shortfall(f.targets, f.limits, p.Stats()) > 0 {
			missing++
		}
	}
	return missing
}

// describeMissing says, for a few nodes short of their warm targets, what
// their pools hold and what their broker links last said.
func (f *allotFleet) describeMissing() string {
	var out []string
	for _, n := range f.nodes {
		p := n.agent.Pool()
		if p == nil {
			out = append(out, n.inst.ID+": not started")
			continue
		}
		st := p.Stats()
		if short := pool.Shortfall(f.targets, f.limits, st); short > 0 {
			out = append(out, fmt.Sprintf("%s: pool %+v shortfall %d, broker link %+v", n.inst.ID, st, short, n.agent.BrokerStatus()))
		}
		if len(out) == 3 {
			break
		}
	}
	return strings.Join(out, "; ")
}

// backends returns each node's CNI backend, in node order.
func (f *allotFleet) backends() []cni {
	out := make([]cni, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = pluginBound{cni: n.agent, timeout: f.cfg.wall(plugin.DefaultTimeout)}
	}
	return out
}

// hostnetFailures returns every failed Recorder call across the fleet.
func (f *allotFleet) hostnetFailures() []error {
	var out []error
	for _, n := range f.nodes {
		for _, c := range n.rec.Failures() {
			out = append(out, fmt.Errorf("%s: %s %v: %w", n.inst.ID, c.Op, c.Attachment, c.Err))
		}
	}
	return out
}

// stop stops every agent and closes their connections.
func (f *allotFleet) stop() {
	f.cancel()
	f.wg.Wait()
	for _, n := range f.nodes {
		if n != nil {
			_ = n.conn.Close()
		}
	}
}
