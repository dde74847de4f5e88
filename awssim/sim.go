// Package awssim is a stand-in AWS for allot's tests, demos and benchmarks:
// an EC2 Query API server that the real aws-sdk-go-v2 ec2 client talks to,
// with EC2's throttling, limits, errors and eventual consistency; an IMDS
// listener per simulated instance; and an admin endpoint to watch counters,
// add or remove instances and switch faults on. Start embeds it in a test;
// cmd/awssim runs it as a process.
package awssim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/allotnet/allot/awssim/ec2"
	"github.com/allotnet/allot/awssim/imds"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/awssim/simclock"
	"github.com/allotnet/allot/awssim/throttle"
	"github.com/allotnet/allot/awssim/world"
)

// Config configures a Sim. Durations are simulated time.
type Config struct {
	// Scenario is the account to simulate; the zero value is an empty
	// account (no VPCs). scenario.Default() is a small example.
	Scenario scenario.Scenario
	// TimeScale is simulated seconds per real second (default 1). Every
	// refill rate, delay and lag speeds up by it.
	TimeScale float64
	// Addr is the EC2 listen address (default 127.0.0.1:0).
	Addr string
	// AdminAddr is the admin listen address (default 127.0.0.1:0; "off"
	// disables the admin endpoint).
	AdminAddr string
	// IMDSAddr is the host the per-instance IMDS listeners bind (default
	// 127.0.0.1); each instance gets its own port.
	IMDSAddr string
	// IMDSPortBase, when non-zero, pins the IMDS ports: the n-th instance
	// launched (from 0, the scenario's first) listens on IMDSPortBase+n, so
	// a command line can name an instance's IMDS before awssim starts.
	// Zero picks free ports.
	IMDSPortBase int
	// IMDSLag, DetachDelay and ConsistencyWindow override the scenario's
	// timing when non-zero; a negative value means none.
	IMDSLag, DetachDelay, ConsistencyWindow time.Duration
	// Seed makes IDs, MACs, random addresses and fault draws reproducible.
	Seed int64
	// Hooks, if set, is registered before the scenario's instances are
	// launched, so it sees their primary ENIs attach.
	Hooks  world.Hooks
	Logger *slog.Logger
}

// Defaults of the scenario's timing.
const (
	DefaultIMDSLag           = time.Second
	DefaultDetachDelay       = 2 * time.Second
	DefaultConsistencyWindow = 0
)

// ActionCounters are one action's request counts.
type ActionCounters = ec2.ActionCounters

// Fault is a switchable misbehaviour of one action.
type Fault = ec2.Fault

// Sim is a running stand-in AWS.
type Sim struct {
	cfg     Config
	log     *slog.Logger
	clock   *simclock.Scaled
	world   *world.World
	limiter *throttle.Limiter
	ec2     *ec2.Server
	signer  *imds.Signer

	ec2Srv, adminSrv *http.Server
	ec2URL, adminURL string

	mu       sync.Mutex
	imds     map[string]*imdsServer
	imdsNext int // instances whose IMDS listener was started, for IMDSPortBase

	stop chan struct{}
	wg   sync.WaitGroup
}

type imdsServer struct {
	srv *http.Server
	url string
	// down makes the listener drop every request unanswered: an IMDS
	// outage as an instance sees one (SetIMDSDown).
	down atomic.Bool
}

// serveOrDrop serves IMDS with h, or drops the connection while the outage lasts.
func (m *imdsServer) serveOrDrop(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.down.Load() {
			panic(http.ErrAbortHandler) // the server closes the connection, answering nothing
		}
		h.ServeHTTP(w, r)
	})
}

// resolve picks a timing value: the config's when set (negative: none),
// else the scenario's, else the default.
func resolve(cfgVal time.Duration, scen *simclock.Duration, def time.Duration) time.Duration {
	switch {
	case cfgVal < 0:
		return 0
	case cfgVal > 0:
		return cfgVal
	case scen != nil:
		return scen.D()
	}
	return def
}

// Start builds the world from cfg.Scenario and starts serving. It returns
// once every listener is bound; ctx only bounds the start.
func Start(ctx context.Context, cfg Config) (*Sim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.AdminAddr == "" {
		cfg.AdminAddr = "127.0.0.1:0"
	}
	if cfg.IMDSAddr == "" {
		cfg.IMDSAddr = "127.0.0.1"
	}
	sc := cfg.Scenario
	clock := simclock.NewScaled(cfg.TimeScale)
	w := world.New(world.Config{
		Clock: clock, AccountID: sc.AccountID, Region: sc.Region, Seed: cfg.Seed, Logger: log,
		IMDSLag:           resolve(cfg.IMDSLag, sc.Timing.IMDSLag, DefaultIMDSLag),
		DetachDelay:       resolve(cfg.DetachDelay, sc.Timing.DetachDelay, DefaultDetachDelay),
		ConsistencyWindow: resolve(cfg.ConsistencyWindow, sc.Timing.ConsistencyWindow, DefaultConsistencyWindow),
	})
	if cfg.Hooks != nil {
		w.AddHooks(cfg.Hooks)
	}
	if err := scenario.Apply(w, sc); err != nil {
		return nil, fmt.Errorf("apply scenario: %w", err)
	}
	specs := throttle.DefaultSpecs()
	maps.Copy(specs, sc.Throttle.Buckets)
	limiter := throttle.New(clock, specs)
	limiter.SetDisabled(sc.Throttle.Disabled)
	limiter.SetSemantics(sc.Throttle.Semantics)
	srv := ec2.New(ec2.Config{World: w, Limiter: limiter, Seed: cfg.Seed, Logger: log})
	faults := map[string]ec2.Fault{}
	for k, f := range sc.Faults {
		faults[k] = ec2.Fault{ErrorRate: f.ErrorRate, ErrorCode: f.ErrorCode, Latency: f.Latency}
	}
	srv.SetFaults(faults)

	s := &Sim{
		cfg: cfg, log: log.With("component", "awssim"), clock: clock, world: w, limiter: limiter, ec2: srv,
		signer: imds.NewSigner(w.Region()),
		imds:   map[string]*imdsServer{}, stop: make(chan struct{}),
	}
	var err error
	if s.ec2Srv, s.ec2URL, err = s.serve(cfg.Addr, srv); err != nil {
		return nil, fmt.Errorf("ec2 listener: %w", err)
	}
	if cfg.AdminAddr != "off" {
		if s.adminSrv, s.adminURL, err = s.serve(cfg.AdminAddr, s.adminHandler()); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("admin listener: %w", err)
		}
	}
	for _, inst := range w.Instances() {
		if err := s.startIMDS(inst.ID); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	s.wg.Add(1)
	go s.tick()
	s.log.Info("awssim started", "ec2", s.ec2URL, "admin", s.adminURL, "timeScale", clock.Scale(),
		"instances", len(w.Instances()))
	return s, nil
}

func (s *Sim) serve(addr string, h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("serve", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return srv, "http://" + ln.Addr().String(), nil
}

// tick lets due events (detach completions) happen, and their hooks fire,
// even when no request arrives.
func (s *Sim) tick() {
	defer s.wg.Done()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.world.Tick()
		}
	}
}

func (s *Sim) startIMDS(instanceID string) error {
	h := imds.NewHandler(instanceID, s.world, imds.Options{
		TokenRequired: s.cfg.Scenario.IMDS.TokenRequired, Signer: s.signer, Logger: s.log,
	})
	port := 0
	if s.cfg.IMDSPortBase > 0 {
		s.mu.Lock()
		port = s.cfg.IMDSPortBase + s.imdsNext
		s.imdsNext++
		s.mu.Unlock()
	}
	m := &imdsServer{}
	srv, url, err := s.serve(net.JoinHostPort(s.cfg.IMDSAddr, strconv.Itoa(port)), m.serveOrDrop(h))
	if err != nil {
		return fmt.Errorf("imds listener for %s: %w", instanceID, err)
	}
	m.srv, m.url = srv, url
	s.mu.Lock()
	s.imds[instanceID] = m
	s.mu.Unlock()
	return nil
}

// SetIMDSDown starts (down) or ends an IMDS outage for one instance: while
// it lasts, its IMDS listener closes every connection without an answer.
func (s *Sim) SetIMDSDown(instanceID string, down bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.imds[instanceID]
	if !ok {
		return fmt.Errorf("no imds for instance %q: unknown or removed", instanceID)
	}
	m.down.Store(down)
	return nil
}

// EC2Endpoint is the EC2 API base URL, "http://127.0.0.1:PORT".
func (s *Sim) EC2Endpoint() string { return s.ec2URL }

// AdminEndpoint is the admin API base URL ("" when disabled).
func (s *Sim) AdminEndpoint() string { return s.adminURL }

// IMDSEndpoint is the base URL of the instance's IMDS listener.
func (s *Sim) IMDSEndpoint(instanceID string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.imds[instanceID]
	if !ok {
		return "", fmt.Errorf("no imds for instance %q: unknown or removed", instanceID)
	}
	return m.url, nil
}

// IdentityCertificatePEM is the public certificate that verifies the
// signature of every instance's identity document: the stand-in for the
// region's AWS public certificate, which a verifier is configured with.
func (s *Sim) IdentityCertificatePEM() ([]byte, error) { return s.signer.CertificatePEM() }

// World is the simulated account.
func (s *Sim) World() *world.World { return s.world }

// Clock is the simulated clock.
func (s *Sim) Clock() simclock.Clock { return s.clock }

// Throttle is the account's token buckets.
func (s *Sim) Throttle() *throttle.Limiter { return s.limiter }

// AddInstance launches an instance and starts its IMDS listener.
func (s *Sim) AddInstance(spec world.InstanceSpec) (world.Instance, error) {
	inst, err := s.world.AddInstance(spec)
	if err != nil {
		return world.Instance{}, err
	}
	if err := s.startIMDS(inst.ID); err != nil {
		return inst, err
	}
	return inst, nil
}

// RemoveInstance terminates an instance and stops its IMDS listener.
func (s *Sim) RemoveInstance(instanceID string) error {
	if err := s.world.RemoveInstance(instanceID); err != nil {
		return err
	}
	s.mu.Lock()
	m := s.imds[instanceID]
	delete(s.imds, instanceID)
	s.mu.Unlock()
	if m != nil {
		_ = m.srv.Close()
	}
	return nil
}

// Counters returns calls, throttled and errors per action.
func (s *Sim) Counters() map[string]ActionCounters { return s.ec2.Counters() }

// ResetCounters zeroes the counters.
func (s *Sim) ResetCounters() { s.ec2.ResetCounters() }

// Faults returns the current faults by action ("*" for every action).
func (s *Sim) Faults() map[string]Fault { return s.ec2.Faults() }

// SetFaults replaces the faults.
func (s *Sim) SetFaults(f map[string]Fault) { s.ec2.SetFaults(f) }

// Close stops every listener and the ticker.
func (s *Sim) Close() error {
	select {
	case <-s.stop:
		return nil
	default:
		close(s.stop)
	}
	var errs []error
	for _, srv := range []*http.Server{s.ec2Srv, s.adminSrv} {
		if srv != nil {
			errs = append(errs, srv.Close())
		}
	}
	s.mu.Lock()
	for id, m := range s.imds {
		errs = append(errs, m.srv.Close())
		delete(s.imds, id)
	}
	s.mu.Unlock()
	s.wg.Wait()
	return errors.Join(errs...)
}
