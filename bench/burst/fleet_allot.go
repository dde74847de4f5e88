package burst

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/allotnet/allot/agent/brokerlink"
	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
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
	// imds makes each agent's IMDS client.
	imds *imdsClients

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
		cfg: cfg, mode: mode, brokerAddr: brokerAddr, dir: dir, tls: tc, imds: newIMDSClients(),
		targets: pool.DefaultTargets(mode == daemon.ModePrefix), limits: limits,
		runCtx: runCtx, cancel: cancel,
	}, nil
}

// Joining: how many agents start at once, and how often one start is
// tried. A start reads the node's identity from its IMDS and registers
// with the broker; on two cores shared with the broker and awssim, more
// starts at once only queue for the CPU, and thousands of nodes joining
// make a slow moment likely, which a later try rides out.
const (
	joinParallel = 8
	joinAttempts = 3
	joinBackoff  = time.Second
)

// join starts an agent per instance and returns once every one has
// started (read its identity, restored its empty checkpoint). The nodes
// that did start are in the fleet, in instance order, even when others did
// not: the error is a *JoinError naming those.
func (f *allotFleet) join(ctx context.Context, insts []awssim.AdminInstance) error {
	hot := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if ctx.Value(hotPathKey{}) != nil {
			f.hotCalls.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	nodes := make([]*allotNode, len(insts))
	errs := make([]error, len(insts))
	sem := make(chan struct{}, joinParallel)
	var wg sync.WaitGroup
	for i, inst := range insts {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = ctx.Err()
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			nodes[i], errs[i] = f.startWithRetry(ctx, inst, hot)
		})
	}
	wg.Wait()
	failed := &JoinError{}
	for i, n := range nodes {
		if n != nil {
			f.nodes = append(f.nodes, n)
		} else {
			failed.Failed = append(failed.Failed, FailedJoin{Instance: insts[i].ID, Err: errs[i]})
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(failed.Failed) > 0 {
		return failed
	}
	return nil
}

// startWithRetry starts one node's agent, trying again after a failure
// that is not the run's end.
func (f *allotFleet) startWithRetry(ctx context.Context, inst awssim.AdminInstance, hot grpc.UnaryClientInterceptor) (*allotNode, error) {
	var err error
	for attempt := range joinAttempts {
		if attempt > 0 {
			f.cfg.Logger.Warn("agent did not start; trying again", "node", inst.ID, "attempt", attempt+1, "err", err)
			sleepUntil(ctx, time.Now().Add(joinBackoff<<(attempt-1)))
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var n *allotNode
		if n, err = startAgent(ctx, f.runCtx, f.cfg, f.mode, inst, f.brokerAddr, filepath.Join(f.dir, inst.ID), hot, f.tls, f.imds, &f.wg); err == nil {
			return n, nil
		}
	}
	return nil, fmt.Errorf("agent %s: %d attempts: %w", inst.ID, joinAttempts, err)
}

func startAgent(ctx, runCtx context.Context, cfg Config, mode daemon.Mode, inst awssim.AdminInstance, brokerAddr, dir string,
	hot grpc.UnaryClientInterceptor, tc credentials.TransportCredentials, ic *imdsClients, wg *sync.WaitGroup) (*allotNode, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	im, err := ic.client(inst.IMDSEndpoint)
	if err != nil {
		return nil, err
	}
	creds, err := agentCredentials(im, cfg.Logger.With("node", inst.ID))
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
		IMDSCheckAfter:    cfg.wall(daemon.DefaultIMDSCheckAfter),
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
	f.imds.closeIdle()
}

// JoinError names the nodes whose agents did not start; the others did.
type JoinError struct {
	Failed []FailedJoin
}

// FailedJoin is one node that did not join, and why.
type FailedJoin struct {
	Instance string
	Err      error
}

func (e *JoinError) Error() string {
	if len(e.Failed) == 0 {
		return "no node failed to join"
	}
	return fmt.Sprintf("%d nodes did not join, the first %s: %v", len(e.Failed), e.Failed[0].Instance, e.Failed[0].Err)
}
