package burst

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/throttle"
	"github.com/allotnet/allot/bench/lowerbound"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/ratelimit"
)

// fleet is what a burst runs against: allot's agents or ipamd models.
type fleet interface {
	join(ctx context.Context, insts []awssim.AdminInstance) error
	warmMissing() int
	describeMissing() string
	backends() []cni
	stop()
}

// subnetsFor is how many /16 subnets the nodes are spread over: as many as
// asked for, and at least as many as their addresses need (with room for
// /28 alignment in prefix mode).
func subnetsFor(cfg Config) int {
	l, _ := catalogLimits(cfg.InstanceType)
	perNode := l.MaxENIs * l.IPv4PerENI
	if pfx := (cfg.PodsPerNode/16 + 3) * 16 * 2; pfx > perNode {
		perNode = pfx
	}
	const perSubnet = 60000
	return max(cfg.Subnets, (cfg.Nodes*perNode+perSubnet-1)/perSubnet)
}

// runVariant runs one burst against a fresh awssim (and, for allot, a fresh
// broker), and tears everything down.
func runVariant(ctx context.Context, cfg Config, v Variant, work string) (res Result, err error) {
	res = cfg.emptyResult(v)
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "[%s] "+format+"\n", append([]any{v.Name()}, args...)...)
		}
	}
	setupStart := time.Now()
	cloud, err := startCloud(ctx, cfg, CloudConfig{
		Nodes: cfg.Nodes, InstanceType: cfg.InstanceType, Subnets: subnetsFor(cfg), TimeScale: cfg.TimeScale, Seed: cfg.Seed,
		Semantics:   throttle.Semantics{SharedDescribe: cfg.SharedDescribe, DiscreteRefill: cfg.DiscreteRefill},
		BucketScale: v.cloudBucketScale() * cfg.accountScale(),
	})
	if err != nil {
		return res, err
	}
	defer cloud.stop()
	insts, err := cloud.admin.Instances(ctx)
	if err != nil {
		return res, err
	}
	if len(insts) != cfg.Nodes {
		return res, fmt.Errorf("awssim launched %d instances, want %d", len(insts), cfg.Nodes)
	}
	limits, err := typeLimits(ctx, cloud.ec2, cfg.InstanceType)
	if err != nil {
		return res, err
	}
	if v.Mode == daemon.ModePrefix && !limits.PrefixCapable {
		return res, fmt.Errorf("instance type %s takes no /28 prefixes", cfg.InstanceType)
	}

	// Nodes are measured from before they start to the end of the burst.
	runtime.GC()
	debug.FreeOSMemory()
	_ = ResetPeakRSS()
	rssBefore := SelfProcStats().RSSBytes

	var f fleet
	var af *allotFleet
	var ipf *ipamdFleet
	var cf *ciliumFleet
	var broker *brokerHandle
	var etcdProc *etcdHandle
	switch v.System {
	case SystemAllot:
		etcdDir, err := os.MkdirTemp("", "allot-burst-etcd-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(etcdDir)
		pkiDir := filepath.Join(etcdDir, "pki")
		idPEM, err := cloud.admin.identityCertificate(ctx)
		if err != nil {
			return res, err
		}
		if err := writePKI(pkiDir, idPEM); err != nil {
			return res, err
		}
		var etcdEndpoint string
		if cfg.SeparateEtcd {
			if etcdProc, err = startEtcdHandle(ctx, cfg, EtcdChildConfig{DataDir: filepath.Join(etcdDir, "etcd"), Fsync: cfg.EtcdFsync}); err != nil {
				return res, err
			}
			defer etcdProc.stop()
			etcdEndpoint = etcdProc.endpoint
		}
		broker, err = startBrokerHandle(ctx, cfg, BrokerConfig{
			DataDir: etcdDir, EtcdEndpoint: etcdEndpoint, EC2Endpoint: cloud.ec2, Share: v.brokerShare() * cfg.accountScale(), TimeScale: cfg.TimeScale, PlanPolicy: cmp.Or(v.Policy, cfg.PlanPolicy),
			Fsync: cfg.EtcdFsync, Reconciler: true, CPUProfile: profilePath(cfg.BrokerCPUProfile, v),
			PKIDir: pkiDir, ReleaseAfter: cfg.ReleaseAfter,
		})
		if err != nil {
			return res, err
		}
		defer broker.stop()
		if af, err = newAllotFleet(ctx, cfg, v.Mode, broker.addr, filepath.Join(work, "nodes"), pkiDir); err != nil {
			return res, err
		}
		defer af.stop()
		f = af
	case SystemIPAMD:
		if ipf, err = newIPAMDFleet(ctx, cfg, v, cloud.ec2); err != nil {
			return res, err
		}
		defer ipf.stop()
		f = ipf
	case SystemCilium:
		if cf, err = newCiliumFleet(ctx, cfg, v, cloud.ec2); err != nil {
			return res, err
		}
		defer cf.stop()
		f = cf
	default:
		return res, fmt.Errorf("system %q: unknown", v.System)
	}
	// Nodes join in batches, each warm before the next joins, as a cluster
	// grows; the burst comes once all are in.
	early := len(insts) - v.Profile.lateNodes(len(insts))
	dropped := map[string]error{}
	for i := 0; i < early; i += cfg.JoinBatch {
		if err := joinSome(ctx, f, insts[i:min(i+cfg.JoinBatch, early)], dropped, len(insts)); err != nil {
			return res, err
		}
		if err := waitWarm(ctx, cfg, f, cfg.Deadline, progress); err != nil {
			return res, err
		}
	}
	if len(dropped) > 0 {
		insts, early = withoutDropped(insts, early, dropped)
		res.Nodes, res.Pods = len(insts), len(insts)*cfg.PodsPerNode
		res.Problems = append(res.Problems, droppedProblems(dropped)...)
		progress("%d nodes did not join and are left out of the burst", len(dropped))
	}
	progress("%d nodes joined and warm in %.1fs", early, time.Since(setupStart).Seconds())
	if cfg.IdleWindow > 0 && broker != nil {
		if res.Idle, err = measureIdle(ctx, cfg, broker); err != nil {
			return res, err
		}
		progress("idle: %.1f etcd writes/s, %.1f revisions/s (simulated seconds)", res.Idle.WritesPerSec, res.Idle.RevisionsPerSec)
	}
	if err := waitBucketsFull(ctx, cfg, cloud.admin, broker); err != nil {
		return res, err
	}
	res.SetupWall = time.Since(setupStart).Seconds()

	// The burst window starts here.
	enis, err := cloud.admin.ENIs(ctx)
	if err != nil {
		return res, err
	}
	instSubnet := subnetsOf(insts)
	plan := idealPlan(v.Mode, limits, cfg.PodsPerNode, instSubnet, enis, true)
	res.Minimum = lowerbound.MinCalls(plan)
	lbShare := v.boundShare() * cfg.accountScale()
	// The bound is for placing the pods; the warm top-up after the last
	// pod is in the minimum calls but not in the time.
	podsOnly := idealPlan(v.Mode, limits, cfg.PodsPerNode, instSubnet, enis, false)
	arrival := v.Profile.lastArrival(len(insts), cfg.PodsPerNode)
	res.LowerBoundSim = max(lowerBound(lowerbound.MinCalls(podsOnly), lbShare), arrival).Seconds()
	podNodes, _ := idealNodes(v.Mode, limits, cfg.PodsPerNode, instSubnet, enis, false)
	optimal, _ := lowerbound.TimeOptimal(podNodes, lbShare, 1)
	res.TimeOptimalBoundSim = max(optimal, arrival).Seconds()
	if len(plan.Unmet) > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("the planner cannot meet %d nodes' demand (%v)", len(plan.Unmet), anyUnmet(plan)))
	}
	if setup, err := cloud.admin.Counters(ctx); err == nil {
		res.SetupDescribeInstances = setup["DescribeInstances"].Calls
	}
	if err := cloud.admin.ResetCounters(ctx); err != nil {
		return res, err
	}
	if v.Tenant > 0 {
		// The other tool starts with the burst: the worst moment for a
		// broker that has not been told about it.
		if err := cloud.admin.SetTenant(ctx, v.Tenant); err != nil {
			return res, err
		}
	}
	var bStart BrokerStats
	if broker != nil {
		if bStart, err = broker.stats(ctx); err != nil {
			return res, err
		}
	}
	cloudStart, _ := procOf(cloud.pid)
	terms := []floorTerm{{by: "arrivals", sim: arrival}}
	var actionsBefore []int64
	var opCallsBefore int64
	if ipf != nil {
		actionsBefore = ipf.poolActions()
	}
	if cf != nil {
		opCallsBefore = cf.op.Calls()
	}
	nodesStart := SelfProcStats()
	progress("burst: %d pods on %d nodes; lower bound %.1fs simulated", res.Pods, len(insts), res.LowerBoundSim)

	pods, fails, took, joinErr := burst(ctx, cfg, v.Profile, f, insts[early:], func(placed int, elapsed time.Duration) {
		c, _ := cloud.admin.Counters(ctx)
		var calls, thr int64
		for _, x := range c {
			calls += x.Calls
			thr += x.Throttled
		}
		progress("%6.1fs sim: %d/%d pods placed, %d EC2 calls, %d throttled", cfg.simOf(elapsed).Seconds(), placed, res.Pods, calls, thr)
	})

	if joinErr != nil {
		res.Problems = append(res.Problems, "join during the burst: "+joinErr.Error())
	}
	nodesEnd := SelfProcStats()
	cloudEnd, _ := procOf(cloud.pid)
	if ipf != nil {
		terms = append(terms, loopTerm("ipamd's 5 s pool loop", 5*time.Second, actionsBefore, ipf.poolActions()))
	}
	if cf != nil {
		terms = append(terms, cf.limiterTerm(cf.op.Calls()-opCallsBefore))
	}
	var bBurst BrokerStats
	if broker != nil {
		if bBurst, err = broker.stats(ctx); err != nil {
			return res, err
		}
	}
	// The calls are counted until the warm pools are topped up again: that
	// is the end state the minimum is planned for.
	if err := waitWarm(ctx, cfg, f, 2*time.Minute, progress); err != nil {
		if ctx.Err() != nil {
			return res, err
		}
		res.WarmShortAfter, res.WarmShortDetail = f.warmMissing(), f.describeMissing()
	}
	if broker != nil {
		if err := waitPlannedCalls(ctx, cfg, cloud.admin, broker, bStart); err != nil {
			return res, err
		}
	}
	if err := waitQuiet(ctx, cfg, cloud.admin); err != nil {
		return res, err
	}
	res.NodesCPU = nodesEnd.CPUSeconds - nodesStart.CPUSeconds
	res.AgentPeakRSS = (nodesEnd.PeakRSSBytes - rssBefore) / int64(len(insts))
	res.CloudCPU = cloudEnd.CPUSeconds - cloudStart.CPUSeconds
	if cloud.pid == 0 {
		res.CloudCPU = 0
	}
	counters, err := cloud.admin.Counters(ctx)
	if err != nil {
		return res, err
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
	own, by := ownFloor(res.Calls, throttled, lbShare, terms...)
	res.OwnFloorSim, res.OwnFloorBy = own.Seconds(), by
	res.CallsAtMinimum = atMinimum(res.Calls, res.Minimum)
	if v.Tenant > 0 {
		if st, err := cloud.admin.Throttle(ctx); err == nil {
			for _, n := range st.TenantTaken {
				res.TenantTokens += n
			}
		}
	}
	res.FailedAdds = fails

	podFigures(cfg, &res, pods, took)

	endENIs, err := cloud.admin.ENIs(ctx)
	if err != nil {
		return res, err
	}
	res.Problems = append(res.Problems, checkAddresses(pods, insts, endENIs)...)

	switch {
	case af != nil:
		res.HotPathBrokerCalls = af.hotCalls.Load()
		for _, e := range af.hostnetFailures() {
			res.Problems = append(res.Problems, "hostnet: "+e.Error())
		}
		bEnd, err := broker.stats(ctx)
		if err != nil {
			return res, err
		}
		res.Planned = diffCalls(bEnd.Planned, bStart.Planned)
		roundFigures(&res, bStart.Engine, bBurst.Engine)
		res.EtcdWritesByMethod = map[string]int64{}
		for m, n := range bEnd.Writes {
			if d := n - bStart.Writes[m]; d > 0 {
				res.EtcdWritesByMethod[m] = d
				res.EtcdWrites += d
			}
		}
		res.EtcdWritesPerPod = float64(res.EtcdWrites) / float64(res.Pods)
		if broker.pid != 0 {
			res.BrokerCPU = bBurst.Proc.CPUSeconds - bStart.Proc.CPUSeconds
			res.BrokerCores = res.BrokerCPU / took.Seconds()
			res.BrokerCPUTotal = bEnd.Proc.CPUSeconds
			res.BrokerPeakRSS = bEnd.Proc.PeakRSSBytes
			res.BrokerMem = &bEnd.Mem
		}
		if etcdProc != nil {
			if es, err := PidProcStats(etcdProc.pid); err == nil {
				res.EtcdPeakRSS, res.EtcdCPUTotal = es.PeakRSSBytes, es.CPUSeconds
			}
		}
	case ipf != nil:
		res.BaselineErrors = ipf.errors()
		res.BaselineRestarts = ipf.restarts.Load()
	}
	progress("done: %d/%d placed, completion %.1fs simulated (%.2f x bound), %d throttled",
		res.Placed, res.Pods, res.CompletionSim, res.Ratio, res.Throttled)
	if cfg.UpDown != nil && af != nil {
		var udErr error
		res.UpDown, udErr = runUpDown(ctx, upDownEnv{cfg: cfg, admin: cloud.admin, fleet: af, broker: broker,
			insts: insts, limits: limits, share: lbShare, pods: pods}, progress)
		return res, udErr
	}
	return res, nil
}

// podFigures fills the per-pod figures: completion, its ratio to the
// bound, time-to-address percentiles and attempts.
func podFigures(cfg Config, res *Result, pods []podResult, took time.Duration) {
	defer func() {
		if res.OwnFloorSim > 0 {
			res.OwnRatio = res.CompletionSim / res.OwnFloorSim
		}
	}()
	var ttas []time.Duration
	var last time.Duration
	for _, p := range pods {
		res.Attempts += p.Attempts
		if !p.Placed {
			continue
		}
		res.Placed++
		ttas = append(ttas, cfg.simOf(p.TTA))
		last = max(last, p.Done)
	}
	res.TTA = percentiles(ttas)
	res.Complete = res.Placed == res.Pods
	if !res.Complete {
		last = took
		res.Problems = append(res.Problems, fmt.Sprintf("%d of %d pods got no address within %s simulated",
			res.Pods-res.Placed, res.Pods, cfg.Deadline))
	}
	res.CompletionWall = last.Seconds()
	res.CompletionSim = cfg.simOf(last).Seconds()
	if res.LowerBoundSim > 0 {
		res.Ratio = res.CompletionSim / res.LowerBoundSim
	}
	if res.TimeOptimalBoundSim > 0 {
		res.RatioTimeOptimal = res.CompletionSim / res.TimeOptimalBoundSim
	}
}

// profilePath names a variant's broker CPU profile.
func profilePath(base string, v Variant) string {
	if base == "" {
		return ""
	}
	return base + "." + strings.NewReplacer("/", "_", "=", "").Replace(v.Name())
}

func anyUnmet(p planner.Plan) string {
	for id, s := range p.Unmet {
		return fmt.Sprintf("e.g. %s: %d addresses, %s", id, s.Addresses, s.Reason)
	}
	return ""
}

func diffCalls(end, start map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range end {
		if d := v - start[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func procOf(pid int) (ProcStats, error) {
	if pid == 0 {
		return ProcStats{}, nil
	}
	return PidProcStats(pid)
}

// typeLimits asks awssim, through the broker's EC2 client, for the
// instance type's ENI limits.
func typeLimits(ctx context.Context, endpoint, instanceType string) (planner.Limits, error) {
	c, err := ec2client.New(ctx, ec2client.Config{Region: "us-east-1", Endpoint: endpoint, Limiter: ratelimit.New(ratelimit.Config{})})
	if err != nil {
		return planner.Limits{}, err
	}
	m, err := c.DescribeInstanceTypes(ctx, []string{instanceType})
	if err != nil {
		return planner.Limits{}, err
	}
	l, ok := m[instanceType]
	if !ok {
		return planner.Limits{}, fmt.Errorf("awssim does not know instance type %s", instanceType)
	}
	return planner.Limits{MaxENIs: l.MaxENIs, IPv4PerENI: l.IPv4PerENI, PrefixCapable: l.Nitro}, nil
}

// waitWarm waits until every node meets its warm targets.
func waitWarm(ctx context.Context, cfg Config, f fleet, wait time.Duration, progress func(string, ...any)) error {
	deadline := time.Now().Add(cfg.wall(wait))
	last := time.Now()
	for {
		missing := f.warmMissing()
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d nodes still short of their warm targets after %s simulated: %s", missing, wait, f.describeMissing())
		}
		if time.Since(last) > 5*time.Second {
			progress("warming up: %d nodes short of their warm targets (%s)", missing, f.describeMissing())
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitPlannedCalls waits until EC2 has counted every call of the plans the
// broker made since start. Pools at their warm targets don't mean the
// broker is done: a new ENI's addresses serve pods once it is attached,
// before its Modify is sent; and a few quiet simulated seconds are no
// proof on a slow machine, where the executor may not have run for that
// long. It gives up after two simulated minutes, and at least 30 s of wall
// time; the calls still missing then show in the result.
func waitPlannedCalls(ctx context.Context, cfg Config, a *admin, broker *brokerHandle, start BrokerStats) error {
	deadline := time.Now().Add(max(cfg.wall(2*time.Minute), 30*time.Second))
	for {
		b, err := broker.stats(ctx)
		if err != nil {
			return err
		}
		c, err := a.Counters(ctx)
		if err != nil {
			return err
		}
		missing := false
		for action, n := range diffCalls(b.Planned, start.Planned) {
			missing = missing || c[action].Calls < int64(n)
		}
		if !missing || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(cfg.wall(500 * time.Millisecond)):
		}
	}
}

// waitQuiet waits until no mutating EC2 call has been made for three
// simulated seconds (at most two simulated minutes).
func waitQuiet(ctx context.Context, cfg Config, a *admin) error {
	deadline := time.Now().Add(cfg.wall(2 * time.Minute))
	var last int64 = -1
	quietSince := time.Now()
	for time.Now().Before(deadline) {
		c, err := a.Counters(ctx)
		if err != nil {
			return err
		}
		var n int64
		for _, act := range mutatingActions {
			n += c[act].Calls
		}
		if n != last {
			last, quietSince = n, time.Now()
		} else if time.Since(quietSince) >= cfg.wall(3*time.Second) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(cfg.wall(500 * time.Millisecond)):
		}
	}
	return nil
}

// burstBuckets are the EC2 buckets a burst draws from; the lower bound
// assumes they start full, so the burst waits until they are.
var burstBuckets = []string{"CreateNetworkInterface", "AssignPrivateIpAddresses", "ModifyNetworkInterfaceAttribute", "mutating"}

// waitBucketsFull waits until the burst's buckets are full again after the
// warm-up, EC2's and, with allot, the broker's own: at a share below 1 the
// broker's refill slower than EC2's and are still filling when EC2's are
// full. A broker bucket that paces (it was throttled) never shows full, so
// the broker's are waited for at most twice the time they take to fill
// from empty. Then one more simulated second.
func waitBucketsFull(ctx context.Context, cfg Config, a *admin, broker *brokerHandle) error {
	deadline := time.Now().Add(cfg.wall(10 * time.Minute))
	var brokerDeadline time.Time
	for {
		st, err := a.Throttle(ctx)
		if err != nil {
			return err
		}
		full := true
		for _, b := range burstBuckets {
			if spec, ok := st.Buckets[b]; ok && st.Tokens[b] < spec.Capacity-0.01 {
				full = false
			}
		}
		var mine map[string]BucketLevel
		if broker != nil && full {
			bs, err := broker.stats(ctx)
			if err != nil {
				return err
			}
			if brokerDeadline.IsZero() {
				brokerDeadline = time.Now().Add(2 * fillTime(bs.Buckets))
			}
			mine, full = bs.Buckets, bucketsFull(bs.Buckets) || time.Now().After(brokerDeadline)
		}
		if full {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("EC2 buckets not full 10 minutes (simulated) after the warm-up: EC2's %v, the broker's %v", st.Tokens, mine)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(cfg.wall(time.Second)):
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(cfg.wall(time.Second)):
		return nil
	}
}
