package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/brokerlink/brokertest"
	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
	"github.com/allotnet/allot/agent/identity"
	"github.com/allotnet/allot/agent/pool"
	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// env is one simulated node: awssim (EC2 and this instance's IMDS, reached
// through the real SDK client), a fake broker that changes awssim for what
// it delivers, a checkpoint directory, and a recorder for the host network.
type env struct {
	t      *testing.T
	sim    *awssim.Sim
	inst   string
	broker *brokertest.Broker
	imds   identity.MetadataAPI
	dir    string
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sim, err := awssim.Start(ctx, awssim.Config{
		Scenario: scenario.Scenario{
			Region: "us-east-1",
			VPCs: []scenario.VPC{{CIDRs: []string{"10.0.0.0/16"},
				Subnets: []scenario.Subnet{{Name: "a", CIDR: "10.0.0.0/20", AZ: "us-east-1a"}}}},
			Instances: []scenario.Instance{{Subnet: "a", Type: "c5.xlarge"}},
		},
		AdminAddr: "off",
		IMDSLag:   -1, // tests that need lag set it
		Seed:      1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	inst := sim.World().Instances()[0].ID
	ep, err := sim.IMDSEndpoint(inst)
	if err != nil {
		t.Fatal(err)
	}
	imds, err := identity.NewClient(ep)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, sim: sim, inst: inst, broker: brokertest.Start(t, sim.World()), imds: imds, dir: t.TempDir()}
}

func (e *env) checkpointPath() string { return filepath.Join(e.dir, "checkpoint.json") }

// config is a config for fast tests: short intervals, a short ADD wait.
func (e *env) config() Config {
	return Config{
		CheckpointPath:  e.checkpointPath(),
		MaxAddWait:      10 * time.Second,
		UsageInterval:   20 * time.Millisecond,
		ConfirmInterval: 10 * time.Millisecond,
	}
}

// agentRun is an agent running in the background.
type agentRun struct {
	*Agent
	net    *hostnettest.Recorder
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// start starts an agent over net and waits until it serves. The fake
// broker sends no instance limits, so unless cfg sets them, the agent is
// given c5.xlarge's, as the real broker would tell it.
func (e *env) start(cfg Config, net *hostnettest.Recorder) *agentRun {
	e.t.Helper()
	if cfg.Limits == (pool.Limits{}) {
		cfg.Limits = pool.Limits{MaxENIs: 4, IPv4PerENI: 15}
	}
	return e.startOn(cfg, net, e.broker.Client())
}

// startOn starts an agent over net talking to broker and waits until it
// serves.
func (e *env) startOn(cfg Config, net *hostnettest.Recorder, broker allotv1.NodeServiceClient) *agentRun {
	e.t.Helper()
	return e.startWith(cfg, net, broker, nil)
}

// startWith is startOn with prepare run on the agent before it starts.
func (e *env) startWith(cfg Config, net *hostnettest.Recorder, broker allotv1.NodeServiceClient, prepare func(*Agent)) *agentRun {
	e.t.Helper()
	a, err := New(cfg, Deps{IMDS: e.imds, Network: net, Broker: broker, Logger: testLogger(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	if prepare != nil {
		prepare(a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &agentRun{Agent: a, net: net, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for !a.Ready() {
		select {
		case err := <-r.done:
			e.t.Fatalf("agent stopped while starting: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatal("agent did not become ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.t.Cleanup(r.stop)
	return r
}

// stop stops the agent and waits for Run to return.
func (r *agentRun) stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
}

// registered waits until the agent registered with the fake broker.
func (e *env) registered() {
	e.t.Helper()
	brokertest.WaitFor(e.t, 10*time.Second, "registration", func() bool {
		return e.broker.Registration(e.inst) != nil
	})
}

func podReq(cid, pod string) cniserver.Request {
	return cniserver.Request{
		Attachment:   cniserver.Attachment{Network: "allot", ContainerID: cid, IfName: "eth0"},
		NetNS:        "/var/run/netns/cni-" + cid,
		CNIVersion:   "1.1.0",
		PodNamespace: "default",
		PodName:      pod,
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mustAdd runs an ADD that must succeed.
func mustAdd(t *testing.T, a *agentRun, req cniserver.Request) cniserver.AddResult {
	t.Helper()
	res, err := a.Add(ctxT(t), req)
	if err != nil {
		t.Fatalf("add %s: %v", req.Attachment, err)
	}
	return res
}

// addWithin runs an ADD that may wait at most d for an address. Tests that
// check no address is handed out bound that one ADD this way, not with a
// short MaxAddWait: that would bound the ADDs that must succeed too, and on
// a loaded machine the agent can take longer than a short wait to bring a
// delivered address into the pool.
func addWithin(t *testing.T, a *agentRun, req cniserver.Request, d time.Duration) (cniserver.AddResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctxT(t), d)
	defer cancel()
	return a.Add(ctx, req)
}

// wired returns the address the recorder has wired for an attachment.
func wired(r *hostnettest.Recorder, req cniserver.Request) (netip.Addr, bool) {
	for _, p := range r.Pods() {
		if p.Attachment == req.Attachment {
			return p.Address, true
		}
	}
	return netip.Addr{}, false
}

// deliver hands n addresses to the node and waits until the pool holds them.
func (e *env) deliver(a *agentRun, n int) []netip.Addr {
	e.t.Helper()
	e.registered()
	before := a.Pool().Stats().Total
	got, err := e.broker.Deliver(e.inst, n)
	if err != nil {
		e.t.Fatal(err)
	}
	brokertest.WaitFor(e.t, 10*time.Second, "delivered addresses in the pool", func() bool {
		return a.Pool().Stats().Total >= before+n
	})
	var out []netip.Addr
	for _, s := range got {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func isPoolEmpty(err error) bool { return errors.Is(err, cniserver.ErrPoolEmpty) }

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustIPNet(t *testing.T, s string) net.IPNet {
	t.Helper()
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	n.IP = ip
	return *n
}
