package burst

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/allotnet/allot/bench/lowerbound"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/etcdembed"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/leader"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/reconciler"
	"github.com/allotnet/allot/broker/server"
	"github.com/allotnet/allot/broker/store"
)

// Cluster is the broker's cluster name in the benchmark (etcd prefix, ENI
// tag).
const Cluster = "burst"

// BrokerConfig is what the benchmark's broker is told. It is the production
// wiring of cmd/allot-broker (embedded etcd, store, leader election, gRPC
// server, and on the leader the engine and the reconciler), with every
// timer scaled like the simulation and a stats endpoint added.
type BrokerConfig struct {
	// DataDir holds the embedded etcd's data. Required.
	DataDir string
	// EC2Endpoint is awssim's EC2 URL. Required.
	EC2Endpoint string
	// Share is the fraction of each EC2 bucket the broker may use.
	Share float64
	// TimeScale is simulated seconds per real second.
	TimeScale float64
	// Fsync makes etcd sync its WAL as in production; off is faster and
	// loses data on a crash, which a benchmark doesn't mind.
	Fsync bool
	// Reconciler runs the reconciler on the leader, as allot-broker does.
	Reconciler bool
	// CPUProfile, if set, is where the child writes a pprof CPU profile of
	// the broker when it stops.
	CPUProfile string
	Logger     *slog.Logger
}

// Flags registers the config's flags on fs, with c's values as defaults.
// Args produces the matching command line, so the benchmark can start its
// broker as a child process ("allot-burst broker ...").
func (c *BrokerConfig) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "embedded etcd data directory")
	fs.StringVar(&c.EC2Endpoint, "ec2-endpoint", c.EC2Endpoint, "awssim EC2 endpoint")
	fs.Float64Var(&c.Share, "bucket-share", c.Share, "fraction (0,1] of each EC2 bucket the broker may use")
	fs.Float64Var(&c.TimeScale, "time-scale", c.TimeScale, "simulated seconds per real second")
	fs.BoolVar(&c.Fsync, "etcd-fsync", c.Fsync, "fsync etcd's WAL (production behaviour)")
	fs.BoolVar(&c.Reconciler, "reconciler", c.Reconciler, "run the reconciler on the leader")
	fs.StringVar(&c.CPUProfile, "cpuprofile", c.CPUProfile, "write a CPU profile here on exit")
}

// Args is the command line Flags parses back into c.
func (c BrokerConfig) Args() []string {
	return []string{
		"--data-dir", c.DataDir, "--ec2-endpoint", c.EC2Endpoint,
		"--bucket-share", strconv.FormatFloat(c.Share, 'g', -1, 64),
		"--time-scale", strconv.FormatFloat(c.TimeScale, 'g', -1, 64),
		"--etcd-fsync=" + strconv.FormatBool(c.Fsync),
		"--reconciler=" + strconv.FormatBool(c.Reconciler),
		"--cpuprofile", c.CPUProfile,
	}
}

// BrokerStats are the broker's counters since it started. The harness
// takes differences of two snapshots for the burst window.
type BrokerStats struct {
	// Writes are etcd write transactions by store method.
	Writes map[string]int64 `json:"writes"`
	// Engine are the leader engine's counters (zero before it leads).
	Engine executor.Stats `json:"engine"`
	// Planned sums lowerbound.MinCalls over every plan the engine made.
	Planned map[string]int `json:"planned"`
	// Plans is how many non-empty plans the engine made.
	Plans int `json:"plans"`
	// EC2Calls and EC2Throttled are the EC2 client's own counts by action.
	EC2Calls     map[string]int64 `json:"ec2_calls"`
	EC2Throttled map[string]int64 `json:"ec2_throttled"`
	// Proc is the process's CPU and memory (meaningful only when the
	// broker runs in a process of its own).
	Proc ProcStats `json:"proc"`
}

// Broker is a running benchmark broker, in this process.
type Broker struct {
	// Addr is the gRPC address agents dial.
	Addr string

	cfg  BrokerConfig
	st   *store.Store
	ec2c *ec2client.Client

	mu      sync.Mutex
	eng     *executor.Engine
	planned map[string]int
	plans   int

	stop func()
}

// StartBroker starts a broker in this process. Close stops it.
func StartBroker(ctx context.Context, cfg BrokerConfig) (b *Broker, err error) {
	if cfg.DataDir == "" || cfg.EC2Endpoint == "" {
		return nil, errors.New("bench broker: data dir and EC2 endpoint are required")
	}
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var cleanups []func()
	defer func() {
		if err != nil {
			for i := len(cleanups) - 1; i >= 0; i-- {
				cleanups[i]()
			}
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("bench broker: %w", err)
	}
	etcd, err := etcdembed.Start(ctx, etcdembed.Config{
		Dir: filepath.Join(cfg.DataDir, "etcd"), UnsafeNoFsync: !cfg.Fsync, Logger: log.With("component", "etcd"),
	})
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, etcd.Close)
	cli, err := etcd.Client()
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { _ = cli.Close() })
	st, err := store.Open(cli, Cluster)
	if err != nil {
		return nil, err
	}
	ec2c, err := ec2client.New(ctx, ec2client.Config{
		Region: "us-east-1", Endpoint: cfg.EC2Endpoint,
		Limiter: ratelimit.New(ratelimit.Config{Share: cfg.Share, TimeScale: cfg.TimeScale}),
		Logger:  log.With("component", "ec2client"),
	})
	if err != nil {
		return nil, err
	}
	el, err := leader.New(leader.Config{Client: cli, Prefix: st.Prefix(), Name: "bench-broker", TTL: 10 * time.Second, Logger: log})
	if err != nil {
		return nil, err
	}
	srv, err := server.New(server.Config{Store: st, Leader: el, Logger: log})
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench broker: listen: %w", err)
	}
	b = &Broker{Addr: lis.Addr().String(), cfg: cfg, st: st, ec2c: ec2c, planned: map[string]int{}}
	go func() { _ = srv.Serve(lis) }()
	cleanups = append(cleanups, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Stop(sctx)
	})

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		_ = el.Run(runCtx, func(ctx context.Context) error { return b.lead(ctx, log) })
	}()
	cleanups = append(cleanups, func() {
		cancel()
		<-elected
	})
	b.stop = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	return b, nil
}

// lead is one leadership term: the engine and (optionally) the reconciler,
// with allot-broker's timers divided by the time scale.
func (b *Broker) lead(ctx context.Context, log *slog.Logger) error {
	scaled := func(d time.Duration) time.Duration { return time.Duration(float64(d) / b.cfg.TimeScale) }
	eng := executor.New(executor.Config{
		Cluster: Cluster, Store: b.st, EC2: b.ec2c, Logger: log, OnPlan: b.onPlan,
	}.WithTimeScale(b.cfg.TimeScale))
	b.mu.Lock()
	b.eng = eng
	b.mu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return eng.Run(gctx) })
	if b.cfg.Reconciler {
		rec := reconciler.New(reconciler.Config{
			Cluster: Cluster, Store: b.st, EC2: b.ec2c, Logger: log,
			Interval: scaled(time.Minute), Grace: scaled(time.Minute),
		})
		g.Go(func() error { return rec.Run(gctx) })
	}
	return g.Wait()
}

func (b *Broker) onPlan(p planner.Plan) {
	calls := lowerbound.MinCalls(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.plans++
	for k, v := range calls {
		b.planned[k] += v
	}
}

// Stats returns the broker's counters; Proc is this process's.
func (b *Broker) Stats() BrokerStats {
	b.mu.Lock()
	s := BrokerStats{Planned: map[string]int{}, Plans: b.plans}
	for k, v := range b.planned {
		s.Planned[k] = v
	}
	eng := b.eng
	b.mu.Unlock()
	if eng != nil {
		s.Engine = eng.Stats()
	}
	s.Writes = b.st.Writes()
	s.EC2Calls = b.ec2c.Calls()
	s.EC2Throttled = b.ec2c.Throttled()
	s.Proc = SelfProcStats()
	return s
}

// Close stops the broker: the server, the leader's work, then etcd.
func (b *Broker) Close() { b.stop() }

// childHello is the first line a child process writes on stdout: where to
// reach it.
type childHello struct {
	GRPC  string `json:"grpc,omitempty"`
	Stats string `json:"stats,omitempty"`
	EC2   string `json:"ec2,omitempty"`
	Admin string `json:"admin,omitempty"`
	PID   int    `json:"pid"`
}

// ServeBrokerChild runs the broker as the benchmark's child process: it
// starts the broker and a stats endpoint (GET /stats, JSON BrokerStats),
// writes a childHello line to out, and runs until ctx ends (main ends it
// when stdin closes, so the child dies with the harness).
func ServeBrokerChild(ctx context.Context, cfg BrokerConfig, out *os.File) error {
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	b, err := StartBroker(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(b.Stats())
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("stats listener: %w", err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(lis) }()
	defer hs.Close()
	hello := childHello{GRPC: b.Addr, Stats: "http://" + lis.Addr().String() + "/stats", PID: os.Getpid()}
	if err := json.NewEncoder(out).Encode(hello); err != nil {
		return fmt.Errorf("write hello: %w", err)
	}
	<-ctx.Done()
	return nil
}
