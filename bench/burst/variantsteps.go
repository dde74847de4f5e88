package burst

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/throttle"
	"github.com/allotnet/allot/bench/lowerbound"
	"github.com/allotnet/allot/broker/planner"
)

// variantRun is one variant's run as runVariant steps through it: what the
// steps share, and what each leaves for the next.
type variantRun struct {
	cfg  Config
	v    Variant
	work string
	res  Result

	// stops are the tear-downs of what the steps started, run last first.
	stops []func()

	cloud  *cloudHandle
	insts  []awssim.AdminInstance
	limits planner.Limits
	early  int // nodes in before the burst; the rest join during it

	f        fleet
	af       *allotFleet
	ipf      *ipamdFleet
	cf       *ciliumFleet
	broker   *brokerHandle
	etcdProc *etcdHandle

	lbShare float64       // the share of every bucket the floors assume
	arrival time.Duration // when the profile's last pod arrives
}

// burstWindow is what the burst step measured, for the steps after it.
type burstWindow struct {
	pods       []podResult
	fails      map[string]int
	took       time.Duration
	terms      []floorTerm
	bStart     BrokerStats
	bBurst     BrokerStats
	nodesStart ProcStats
	nodesEnd   ProcStats
	cloudStart ProcStats
	cloudEnd   ProcStats
}

func (r *variantRun) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "[%s] "+format+"\n", append([]any{r.v.Name()}, args...)...)
	}
}

func (r *variantRun) onStop(f func()) { r.stops = append(r.stops, f) }

func (r *variantRun) stop() {
	for i := len(r.stops) - 1; i >= 0; i-- {
		r.stops[i]()
	}
}

// startCloud starts awssim with the variant's buckets and reads its
// instances and the instance type's limits.
func (r *variantRun) startCloud(ctx context.Context) error {
	cfg := r.cfg
	cloud, err := startCloud(ctx, cfg, CloudConfig{
		Nodes: cfg.Nodes, InstanceType: cfg.InstanceType, Subnets: subnetsFor(cfg), TimeScale: cfg.TimeScale, Seed: cfg.Seed,
		Semantics:   throttle.Semantics{SharedDescribe: cfg.SharedDescribe, DiscreteRefill: cfg.DiscreteRefill},
		BucketScale: r.v.cloudBucketScale() * cfg.accountScale(),
		Nice:        cfg.CloudNice,
	})
	if err != nil {
		return err
	}
	r.cloud = cloud
	r.onStop(cloud.stop)
	if r.insts, err = cloud.admin.Instances(ctx); err != nil {
		return err
	}
	if len(r.insts) != cfg.Nodes {
		return fmt.Errorf("awssim launched %d instances, want %d", len(r.insts), cfg.Nodes)
	}
	if r.limits, err = typeLimits(ctx, cloud.ec2, cfg.InstanceType); err != nil {
		return err
	}
	if r.v.Mode == daemon.ModePrefix && !r.limits.PrefixCapable {
		return fmt.Errorf("instance type %s takes no /28 prefixes", cfg.InstanceType)
	}
	return nil
}

// startFleet starts the system under test: allot's broker (and etcd apart
// when asked) and agents, or the ipamd or Cilium models.
func (r *variantRun) startFleet(ctx context.Context) error {
	var err error
	switch r.v.System {
	case SystemAllot:
		return r.startAllot(ctx)
	case SystemIPAMD:
		if r.ipf, err = newIPAMDFleet(ctx, r.cfg, r.v, r.cloud.ec2); err != nil {
			return err
		}
		r.onStop(r.ipf.stop)
		r.f = r.ipf
	case SystemCilium:
		if r.cf, err = newCiliumFleet(ctx, r.cfg, r.v, r.cloud.ec2); err != nil {
			return err
		}
		r.onStop(r.cf.stop)
		r.f = r.cf
	default:
		return fmt.Errorf("system %q: unknown", r.v.System)
	}
	return nil
}

func (r *variantRun) startAllot(ctx context.Context) error {
	cfg, v := r.cfg, r.v
	etcdDir, err := os.MkdirTemp("", "allot-burst-etcd-")
	if err != nil {
		return err
	}
	r.onStop(func() { os.RemoveAll(etcdDir) })
	pkiDir := filepath.Join(etcdDir, "pki")
	idPEM, err := r.cloud.admin.identityCertificate(ctx)
	if err != nil {
		return err
	}
	if err := writePKI(pkiDir, idPEM); err != nil {
		return err
	}
	var etcdEndpoint string
	if cfg.SeparateEtcd {
		if r.etcdProc, err = startEtcdHandle(ctx, cfg, EtcdChildConfig{DataDir: filepath.Join(etcdDir, "etcd"), Fsync: cfg.EtcdFsync}); err != nil {
			return err
		}
		r.onStop(r.etcdProc.stop)
		etcdEndpoint = r.etcdProc.endpoint
	}
	r.broker, err = startBrokerHandle(ctx, cfg, BrokerConfig{
		DataDir: etcdDir, EtcdEndpoint: etcdEndpoint, EC2Endpoint: r.cloud.ec2, Share: v.brokerShare() * cfg.accountScale(), TimeScale: cfg.TimeScale, PlanPolicy: cmp.Or(v.Policy, cfg.PlanPolicy),
		Fsync: cfg.EtcdFsync, Reconciler: true, CPUProfile: profilePath(cfg.BrokerCPUProfile, v), RoundCPU: cfg.BrokerRoundCPU, Nice: cfg.BrokerNice,
		PKIDir: pkiDir, ReleaseAfter: cfg.ReleaseAfter, MaxAgentCalls: cfg.MaxAgentCalls,
	})
	if err != nil {
		return err
	}
	r.onStop(r.broker.stop)
	if r.af, err = newAllotFleet(ctx, cfg, v.Mode, r.broker.addr, filepath.Join(r.work, "nodes"), pkiDir); err != nil {
		return err
	}
	r.onStop(r.af.stop)
	r.f = r.af
	return nil
}

// joinAll joins the nodes in batches, each warm before the next joins, as
// a cluster grows (the profile's late nodes join during the burst); then
// measures the idle broker when asked, and waits for full buckets.
func (r *variantRun) joinAll(ctx context.Context, setupStart time.Time) error {
	cfg := r.cfg
	r.early = len(r.insts) - r.v.Profile.lateNodes(len(r.insts))
	dropped := map[string]error{}
	for i := 0; i < r.early; i += cfg.JoinBatch {
		if err := joinSome(ctx, r.f, r.insts[i:min(i+cfg.JoinBatch, r.early)], dropped, len(r.insts)); err != nil {
			return err
		}
		if err := waitWarm(ctx, cfg, r.f, cfg.Deadline, r.progress); err != nil {
			return err
		}
	}
	if len(dropped) > 0 {
		r.insts, r.early = withoutDropped(r.insts, r.early, dropped)
		r.res.Nodes, r.res.Pods = len(r.insts), len(r.insts)*cfg.PodsPerNode
		r.res.Problems = append(r.res.Problems, droppedProblems(dropped)...)
		r.progress("%d nodes did not join and are left out of the burst", len(dropped))
	}
	r.progress("%d nodes joined and warm in %.1fs", r.early, time.Since(setupStart).Seconds())
	if cfg.IdleWindow > 0 && r.broker != nil {
		var err error
		if r.res.Idle, err = measureIdle(ctx, cfg, r.broker); err != nil {
			return err
		}
		r.progress("idle: %.1f etcd writes/s, %.1f revisions/s (simulated seconds)", r.res.Idle.WritesPerSec, r.res.Idle.RevisionsPerSec)
	}
	return waitBucketsFull(ctx, cfg, r.cloud.admin, r.broker)
}

// floors plans the burst ideally from the ENIs the nodes have now: the
// minimum calls and both floors the completion is compared against.
func (r *variantRun) floors(ctx context.Context) error {
	cfg, v, res := r.cfg, r.v, &r.res
	enis, err := r.cloud.admin.ENIs(ctx)
	if err != nil {
		return err
	}
	instSubnet := subnetsOf(r.insts)
	plan := idealPlan(v.Mode, r.limits, cfg.PodsPerNode, instSubnet, enis, true)
	res.Minimum = lowerbound.MinCalls(plan)
	r.lbShare = v.boundShare() * cfg.accountScale()
	// The bound is for placing the pods; the warm top-up after the last
	// pod is in the minimum calls but not in the time.
	podsOnly := idealPlan(v.Mode, r.limits, cfg.PodsPerNode, instSubnet, enis, false)
	r.arrival = v.Profile.lastArrival(len(r.insts), cfg.PodsPerNode)
	res.LowerBoundSim = max(lowerBound(lowerbound.MinCalls(podsOnly), r.lbShare), r.arrival).Seconds()
	podNodes, _ := idealNodes(v.Mode, r.limits, cfg.PodsPerNode, instSubnet, enis, false)
	optimal, _ := lowerbound.TimeOptimal(podNodes, r.lbShare, 1)
	res.TimeOptimalBoundSim = max(optimal, r.arrival).Seconds()
	// The cloud leaves awssim's IMDS lag at its default.
	withLag, _ := lowerbound.TimeOptimalLag(podNodes, r.lbShare, 1, awssim.DefaultIMDSLag)
	res.IMDSBoundSim = max(withLag, r.arrival).Seconds()
	if len(plan.Unmet) > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("the planner cannot meet %d nodes' demand (%v)", len(plan.Unmet), anyUnmet(plan)))
	}
	return nil
}

// burst runs the burst window: from full buckets and zeroed counters until
// every pod has its address or the deadline passes.
func (r *variantRun) burst(ctx context.Context) (*burstWindow, error) {
	cfg, res := r.cfg, &r.res
	admin := r.cloud.admin
	if setup, err := admin.Counters(ctx); err == nil {
		res.SetupDescribeInstances = setup["DescribeInstances"].Calls
	}
	if err := admin.ResetCounters(ctx); err != nil {
		return nil, err
	}
	if r.v.Tenant > 0 {
		// The other tool starts with the burst: the worst moment for a
		// broker that has not been told about it.
		if err := admin.SetTenant(ctx, r.v.Tenant); err != nil {
			return nil, err
		}
	}
	w := &burstWindow{terms: []floorTerm{{by: "arrivals", sim: r.arrival}}}
	var err error
	if r.broker != nil {
		if w.bStart, err = r.broker.stats(ctx); err != nil {
			return nil, err
		}
	}
	w.cloudStart, _ = procOf(r.cloud.pid)
	var actionsBefore []int64
	var opCallsBefore int64
	if r.ipf != nil {
		actionsBefore = r.ipf.poolActions()
	}
	if r.cf != nil {
		opCallsBefore = r.cf.op.Calls()
	}
	w.nodesStart = SelfProcStats()
	r.progress("burst: %d pods on %d nodes; lower bound %.1fs simulated", res.Pods, len(r.insts), res.LowerBoundSim)

	var joinErr error
	w.pods, w.fails, w.took, joinErr = burst(ctx, cfg, r.v.Profile, r.f, r.insts[r.early:], r.tick(ctx))
	if joinErr != nil {
		res.Problems = append(res.Problems, "join during the burst: "+joinErr.Error())
	}
	w.nodesEnd = SelfProcStats()
	w.cloudEnd, _ = procOf(r.cloud.pid)
	if r.ipf != nil {
		w.terms = append(w.terms, loopTerm("ipamd's 5 s pool loop", 5*time.Second, actionsBefore, r.ipf.poolActions()))
	}
	if r.cf != nil {
		w.terms = append(w.terms, r.cf.limiterTerm(r.cf.op.Calls()-opCallsBefore))
	}
	if r.broker != nil {
		if w.bBurst, err = r.broker.stats(ctx); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// tick reports the burst's progress: pods placed, EC2 calls, throttles.
func (r *variantRun) tick(ctx context.Context) func(placed int, elapsed time.Duration) {
	return func(placed int, elapsed time.Duration) {
		c, _ := r.cloud.admin.Counters(ctx)
		var calls, thr int64
		for _, x := range c {
			calls += x.Calls
			thr += x.Throttled
		}
		r.progress("%6.1fs sim: %d/%d pods placed, %d EC2 calls, %d throttled", r.cfg.simOf(elapsed).Seconds(), placed, r.res.Pods, calls, thr)
	}
}

// settle waits for the end state the minimum calls are planned for: the
// warm pools topped up again, every planned call made, EC2 quiet.
func (r *variantRun) settle(ctx context.Context, w *burstWindow) error {
	start := time.Now().Add(-w.took)
	r.res.WarmFloorSim = max(lowerBound(r.res.Minimum, r.lbShare), r.arrival).Seconds()
	wait := 2 * time.Minute
	if r.cfg.WarmUntilFloor {
		wait += max(time.Duration(r.res.WarmFloorSim*float64(time.Second))-r.cfg.simOf(w.took), 0)
	}
	if err := waitWarm(ctx, r.cfg, r.f, wait, r.progress); err != nil {
		if ctx.Err() != nil {
			return err
		}
		r.res.WarmShortAfter, r.res.WarmShortDetail = r.f.warmMissing(), r.f.describeMissing()
	} else {
		r.res.WarmSim = r.cfg.simOf(time.Since(start)).Seconds()
	}
	if r.broker != nil {
		if err := waitPlannedCalls(ctx, r.cfg, r.cloud.admin, r.broker, w.bStart); err != nil {
			return err
		}
	}
	if err := waitQuiet(ctx, r.cfg, r.cloud.admin); err != nil {
		return err
	}
	r.res.NodesCPU = w.nodesEnd.CPUSeconds - w.nodesStart.CPUSeconds
	r.res.CloudCPU = w.cloudEnd.CPUSeconds - w.cloudStart.CPUSeconds
	if r.cloud.pid == 0 {
		r.res.CloudCPU = 0
	}
	return nil
}

// report fills the result from EC2's counters, the pods and, per system,
// the broker's or the baseline's own figures.
func (r *variantRun) report(ctx context.Context, w *burstWindow) error {
	res := &r.res
	counters, err := r.cloud.admin.Counters(ctx)
	if err != nil {
		return err
	}
	res.Calls, res.Errors = map[string]int64{}, map[string]int64{}
	throttled := map[string]int64{}
	for a, c := range counters {
		res.Calls[a] = c.Calls
		res.Throttled += c.Throttled
		throttled[a] = c.Throttled
		if c.Errors > 0 {
			res.Errors[a] = c.Errors
		}
	}
	own, by := ownFloor(res.Calls, throttled, r.lbShare, w.terms...)
	res.OwnFloorSim, res.OwnFloorBy = own.Seconds(), by
	res.CallsAtMinimum = atMinimum(res.Calls, res.Minimum)
	if r.v.Tenant > 0 {
		if st, err := r.cloud.admin.Throttle(ctx); err == nil {
			for _, n := range st.TenantTaken {
				res.TenantTokens += n
			}
		}
	}
	res.FailedAdds = w.fails
	podFigures(r.cfg, res, w.pods, w.took)
	endENIs, err := r.cloud.admin.ENIs(ctx)
	if err != nil {
		return err
	}
	res.Problems = append(res.Problems, checkAddresses(w.pods, r.insts, endENIs)...)
	switch {
	case r.af != nil:
		return r.reportAllot(ctx, w)
	case r.ipf != nil:
		res.BaselineErrors = r.ipf.errors()
		res.BaselineRestarts = r.ipf.restarts.Load()
	}
	return nil
}

// reportAllot adds the broker's figures: planned calls, rounds, etcd
// writes, and its process's (and etcd's) CPU and memory.
func (r *variantRun) reportAllot(ctx context.Context, w *burstWindow) error {
	res, broker := &r.res, r.broker
	res.HotPathBrokerCalls = r.af.hotCalls.Load()
	for _, e := range r.af.hostnetFailures() {
		res.Problems = append(res.Problems, "hostnet: "+e.Error())
	}
	bEnd, err := broker.stats(ctx)
	if err != nil {
		return err
	}
	res.Planned = diffCalls(bEnd.Planned, w.bStart.Planned)
	roundFigures(res, w.bStart.Engine, w.bBurst.Engine)
	res.EtcdWritesByMethod = map[string]int64{}
	for m, n := range bEnd.Writes {
		if d := n - w.bStart.Writes[m]; d > 0 {
			res.EtcdWritesByMethod[m] = d
			res.EtcdWrites += d
		}
	}
	res.EtcdWritesPerPod = float64(res.EtcdWrites) / float64(res.Pods)
	res.RefusedCalls = bEnd.RefusedCalls - w.bStart.RefusedCalls
	if broker.pid != 0 {
		res.BrokerCPU = w.bBurst.Proc.CPUSeconds - w.bStart.Proc.CPUSeconds
		res.BrokerCores = res.BrokerCPU / w.took.Seconds()
		res.BrokerCPUTotal = bEnd.Proc.CPUSeconds
		res.BrokerPeakRSS = bEnd.Proc.PeakRSSBytes
		res.BrokerMem = &bEnd.Mem
	}
	if r.etcdProc != nil {
		if es, err := PidProcStats(r.etcdProc.pid); err == nil {
			res.EtcdPeakRSS, res.EtcdCPUTotal = es.PeakRSSBytes, es.CPUSeconds
		}
	}
	return nil
}
