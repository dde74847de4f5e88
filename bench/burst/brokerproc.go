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
	httppprof "net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/allotnet/allot/broker/ratelimit"

	"github.com/allotnet/allot/bench/lowerbound"
	"github.com/allotnet/allot/broker/brokerd"
	"github.com/allotnet/allot/broker/clock"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/planner"
)

// Cluster is the broker's cluster name in the benchmark (etcd prefix, ENI
// tag).
const Cluster = "burst"

// BrokerConfig is what the benchmark's broker is told. The broker is
// assembled as allot-broker assembles it (broker/brokerd: embedded etcd,
// store, leader election, gRPC server, and on the leader the engine and
// optionally the reconciler), with every timer scaled like the simulation
// and a stats endpoint added.
type BrokerConfig struct {
	// DataDir holds the embedded etcd's data. Required.
	DataDir string
	// EtcdEndpoint, when set, is an etcd the broker uses instead of
	// embedding one (Config.SeparateEtcd).
	EtcdEndpoint string
	// EC2Endpoint is awssim's EC2 URL. Required.
	EC2Endpoint string
	// Share is the fraction of each EC2 bucket the broker may use.
	Share float64
	// TimeScale is simulated seconds per real second.
	TimeScale float64
	// PlanPolicy is the engine's planner.Policy by name (allot-broker's
	// --plan-policy); empty keeps the engine's default.
	PlanPolicy string
	// ReleaseAfter is the engine's wait (simulated) before it releases a
	// node's surplus; 0 keeps the engine's default.
	ReleaseAfter time.Duration
	// Fsync makes etcd sync its WAL as in production; off is faster and
	// loses data on a crash, which a benchmark doesn't mind.
	Fsync bool
	// Reconciler runs the reconciler on the leader, as allot-broker does.
	Reconciler bool
	// CPUProfile, if set, is where the child writes a pprof CPU profile of
	// the broker when it stops.
	CPUProfile string
	// RoundCPU reads each planning round's CPU time
	// (executor.Config.RoundCPU), at a cost to the rounds' wall time.
	RoundCPU bool
	// Nice, when not 0, is set as the nice value of every thread of the
	// broker's child process as it starts (setNice), so the kernel favours
	// it (below 0) over the harness's other processes. Only the child
	// process honours it.
	Nice int
	// PKIDir holds the broker's certificate and awssim's identity
	// certificate (writePKI); the broker serves TLS and requires
	// attestation. Empty serves plaintext to anyone (tests of the harness
	// itself only).
	PKIDir string
	// MaxAgentCalls is Config.MaxAgentCalls.
	MaxAgentCalls int
	Logger        *slog.Logger
}

// Flags registers the config's flags on fs, with c's values as defaults.
// Args produces the matching command line, so the benchmark can start its
// broker as a child process ("allot-burst broker ...").
func (c *BrokerConfig) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "embedded etcd data directory")
	fs.StringVar(&c.EtcdEndpoint, "etcd-endpoint", c.EtcdEndpoint, "an etcd apart from the broker (empty: embedded in --data-dir)")
	fs.StringVar(&c.EC2Endpoint, "ec2-endpoint", c.EC2Endpoint, "awssim EC2 endpoint")
	fs.Float64Var(&c.Share, "bucket-share", c.Share, "fraction (0,1] of each EC2 bucket the broker may use")
	fs.Float64Var(&c.TimeScale, "time-scale", c.TimeScale, "simulated seconds per real second")
	fs.StringVar(&c.PlanPolicy, "plan-policy", c.PlanPolicy, "planner policy: time-optimal or fewest-calls (empty: the engine's default)")
	fs.DurationVar(&c.ReleaseAfter, "release-after", c.ReleaseAfter, "how long a node's surplus lasts before it is released, simulated (0: the engine's default)")
	fs.BoolVar(&c.Fsync, "etcd-fsync", c.Fsync, "fsync etcd's WAL (production behaviour)")
	fs.BoolVar(&c.Reconciler, "reconciler", c.Reconciler, "run the reconciler on the leader")
	fs.StringVar(&c.CPUProfile, "cpuprofile", c.CPUProfile, "write a CPU profile here on exit")
	fs.BoolVar(&c.RoundCPU, "round-cpu", c.RoundCPU, "read each planning round's CPU time (the engine keeps one thread; costs the rounds wall time)")
	fs.IntVar(&c.Nice, "nice", c.Nice, "nice value of the broker's threads (-20..19; 0: leave as started)")
	fs.StringVar(&c.PKIDir, "pki-dir", c.PKIDir, "directory with the broker's certificate and awssim's identity certificate (TLS and attestation on)")
	fs.IntVar(&c.MaxAgentCalls, "max-agent-calls", c.MaxAgentCalls, "the agents' calls that read or write etcd the broker runs at once (0: its default; negative: no bound)")
}

// Args is the command line Flags parses back into c.
func (c BrokerConfig) Args() []string {
	return []string{
		"--data-dir", c.DataDir, "--etcd-endpoint", c.EtcdEndpoint, "--ec2-endpoint", c.EC2Endpoint,
		"--bucket-share", strconv.FormatFloat(c.Share, 'g', -1, 64),
		"--time-scale", strconv.FormatFloat(c.TimeScale, 'g', -1, 64),
		"--plan-policy", c.PlanPolicy,
		"--release-after", c.ReleaseAfter.String(),
		"--etcd-fsync=" + strconv.FormatBool(c.Fsync),
		"--reconciler=" + strconv.FormatBool(c.Reconciler),
		"--cpuprofile", c.CPUProfile,
		"--round-cpu=" + strconv.FormatBool(c.RoundCPU),
		"--nice", strconv.Itoa(c.Nice),
		"--pki-dir", c.PKIDir,
		"--max-agent-calls", strconv.Itoa(c.MaxAgentCalls),
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
	// Mem are the broker process's memory peaks, sampled every second;
	// zero when the broker runs in the harness's process.
	Mem MemPeaks `json:"mem"`
	// EtcdRevision is etcd's revision: it rises by one per transaction
	// that changed a key, whoever wrote it.
	EtcdRevision int64 `json:"etcd_revision"`
	// RefusedCalls is how many agent calls the broker refused as busy
	// (its bound on calls at once, or a node's earlier call of the kind
	// still running).
	RefusedCalls int64 `json:"refused_calls"`
	// Buckets are the broker's own token buckets for the burst's calls,
	// by EC2 action: what each holds now and its size. At a share below 1
	// they refill slower than EC2's, so they are still filling after
	// EC2's are full again.
	Buckets map[string]BucketLevel `json:"buckets"`
}

// BucketLevel is one client-side token bucket's content, size and refill
// (tokens per wall-clock second: the limiter runs on the wall clock, its
// refill scaled by the time scale).
type BucketLevel struct {
	Tokens float64 `json:"tokens"`
	Size   int     `json:"size"`
	Refill float64 `json:"refill"`
}

// bucketsFull reports whether every bucket listed holds its size.
func bucketsFull(levels map[string]BucketLevel) bool {
	for _, b := range levels {
		if b.Tokens < float64(b.Size)-0.01 {
			return false
		}
	}
	return true
}

// fillTime is the longest any of the buckets takes to fill from empty, in
// wall-clock time.
func fillTime(levels map[string]BucketLevel) time.Duration {
	var most time.Duration
	for _, b := range levels {
		if b.Refill > 0 {
			most = max(most, time.Duration(float64(b.Size)/b.Refill*float64(time.Second)))
		}
	}
	return most
}

// Broker is a running benchmark broker, in this process.
type Broker struct {
	// Addr is the gRPC address agents dial.
	Addr string

	b    *brokerd.Broker
	stop func()

	// Each term starts an engine with counters of its own: ended holds the
	// sum of the engines of earlier terms, and last the engine of the
	// latest term seen, so Stats counts a whole run across a lost lead.
	mu    sync.Mutex
	last  *executor.Engine
	ended executor.Stats
}

// StartBroker starts a broker in this process, assembled as allot-broker
// assembles it (brokerd). Close stops it.
func StartBroker(ctx context.Context, cfg BrokerConfig) (*Broker, error) {
	if cfg.DataDir == "" || cfg.EC2Endpoint == "" {
		return nil, errors.New("bench broker: data dir and EC2 endpoint are required")
	}
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	simClock, err := clock.Scaled(cfg.TimeScale)
	if err != nil {
		return nil, fmt.Errorf("bench broker: %w", err)
	}
	engine := executor.Config{ReleaseAfter: cfg.ReleaseAfter, RoundCPU: cfg.RoundCPU}
	if cfg.PlanPolicy != "" {
		if engine.PlanPolicy, err = planner.ParsePolicy(cfg.PlanPolicy); err != nil {
			return nil, fmt.Errorf("bench broker: %w", err)
		}
	}
	var gc brokerd.GRPCConfig
	var ac *brokerd.AuthConfig
	if cfg.PKIDir != "" {
		opts, a, err := brokerSecurity(cfg.PKIDir)
		if err != nil {
			return nil, err
		}
		gc.Options, ac = opts, a
	}
	etcd := brokerd.EtcdConfig{DataDir: filepath.Join(cfg.DataDir, "etcd"), UnsafeNoFsync: !cfg.Fsync}
	if cfg.EtcdEndpoint != "" {
		etcd = brokerd.EtcdConfig{Endpoints: []string{cfg.EtcdEndpoint}}
	}
	b, err := brokerd.New(ctx, brokerd.Config{
		Name: "bench-broker", Cluster: Cluster, Listen: "127.0.0.1:0",
		Etcd:          etcd,
		EC2:           brokerd.EC2Config{Endpoint: cfg.EC2Endpoint, BucketShare: cfg.Share},
		Clock:         simClock,
		Engine:        engine,
		NoReconciler:  !cfg.Reconciler,
		Logger:        cfg.Logger,
		GRPC:          gc,
		Auth:          ac,
		MaxAgentCalls: cfg.MaxAgentCalls,
	})
	if err != nil {
		return nil, fmt.Errorf("bench broker: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.Run(runCtx)
	}()
	return &Broker{Addr: b.Addr(), b: b, stop: func() {
		cancel()
		<-done
		b.Close()
	}}, nil
}

// engineStats returns the counters of eng, the current term's engine (nil
// between terms), added to those of every earlier term's (an engine's
// counters are final once its term has ended); false before the first term.
func (b *Broker) engineStats(eng *executor.Engine) (executor.Stats, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if eng != nil && b.last != eng {
		if b.last != nil {
			b.ended = b.ended.Plus(b.last.Stats())
		}
		b.last = eng
	}
	if b.last == nil {
		return executor.Stats{}, false
	}
	return b.ended.Plus(b.last.Stats()), true
}

// Stats returns the broker's counters; Proc is this process's.
func (b *Broker) Stats() BrokerStats {
	s := BrokerStats{Planned: map[string]int{}}
	if eng, ok := b.engineStats(b.b.Engine()); ok {
		s.Engine = eng
		s.Plans = int(s.Engine.Plans)
		s.Planned = plannedCalls(s.Engine.Planned)
	}
	s.Writes = b.b.Store().Writes()
	s.EC2Calls = b.b.EC2().Calls()
	s.EC2Throttled = b.b.EC2().Throttled()
	s.RefusedCalls = b.b.RefusedCalls()
	s.Proc = SelfProcStats()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.EtcdRevision, _ = b.b.Store().Revision(ctx)
	if lim := b.b.EC2().Limiter(); lim != nil {
		s.Buckets = map[string]BucketLevel{}
		for _, action := range burstActions {
			c := ratelimit.ClassOf(action, true)
			b := lim.Bucket(c)
			s.Buckets[action] = BucketLevel{Tokens: lim.Tokens(c), Size: b.Size, Refill: b.Refill}
		}
	}
	return s
}

// burstActions are the EC2 actions of a burst's calls.
var burstActions = []string{planner.CallAssign, planner.CallCreate, planner.CallAttach, planner.CallModify}

// plannedCalls is the EC2 calls the planned actions cost, by action name
// (lowerbound.MinCalls of a plan of that many actions of each kind).
func plannedCalls(byKind map[string]int64) map[string]int {
	var p planner.Plan
	for _, k := range []planner.Kind{planner.Assign, planner.CreateAttach} {
		for range byKind[k.String()] {
			p.Actions = append(p.Actions, planner.Action{Kind: k})
		}
	}
	return lowerbound.MinCalls(p)
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
	Etcd  string `json:"etcd,omitempty"`
	PID   int    `json:"pid"`
}

// ServeBrokerChild runs the broker as the benchmark's child process: it
// starts the broker and a stats endpoint (GET /stats, JSON BrokerStats),
// writes a childHello line to out, and runs until ctx ends (main ends it
// when stdin closes, so the child dies with the harness).
func ServeBrokerChild(ctx context.Context, cfg BrokerConfig, out *os.File) error {
	if err := setNice(cfg.Nice); err != nil {
		return err
	}
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
		// A slow round's time goes to waiting on locks and channels as
		// well as to CPU: sample both (one mutex event in 20, blocking
		// over 1 ms), written beside the CPU profile.
		runtime.SetMutexProfileFraction(20)
		runtime.SetBlockProfileRate(1000000)
		defer writeProfile(cfg.CPUProfile+".mutex", "mutex")
		defer writeProfile(cfg.CPUProfile+".block", "block")
	}
	b, err := StartBroker(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	mux := http.NewServeMux()
	// The profiler answers on the same loopback listener, so a heap or CPU
	// profile can be taken during the burst (go tool pprof URL/debug/pprof/heap),
	// or an execution trace (URL/debug/pprof/trace?seconds=5, read with go
	// tool trace: where a planning round waited, ran, or assisted the collector).
	mux.HandleFunc("/debug/pprof/", httppprof.Index)
	mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", httppprof.Trace)
	var mem memSampler
	go mem.run(ctx, time.Second)
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		s := b.Stats()
		mem.sample()
		s.Mem = mem.Peaks()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s)
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

// writeProfile writes the named runtime profile to path; a failure only
// costs the profile.
func writeProfile(path, name string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup(name).WriteTo(f, 0)
}
