package burst

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/allotnet/allot/awssim"
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
// broker), and tears everything down. Its steps are variantRun's methods,
// in the order they run; each fills its part of the result, which is
// returned as far as it got when a step fails.
func runVariant(ctx context.Context, cfg Config, v Variant, work string) (Result, error) {
	r := &variantRun{cfg: cfg, v: v, work: work, res: cfg.emptyResult(v)}
	defer r.stop()
	setupStart := time.Now()
	if err := r.startCloud(ctx); err != nil {
		return r.res, err
	}
	// Nodes are measured from before they start to the end of the burst.
	runtime.GC()
	debug.FreeOSMemory()
	_ = ResetPeakRSS()
	rssBefore := SelfProcStats().RSSBytes
	if err := r.startFleet(ctx); err != nil {
		return r.res, err
	}
	if err := r.joinAll(ctx, setupStart); err != nil {
		return r.res, err
	}
	r.res.SetupWall = time.Since(setupStart).Seconds()
	if err := r.floors(ctx); err != nil {
		return r.res, err
	}
	w, err := r.burst(ctx)
	if err != nil {
		return r.res, err
	}
	if err := r.settle(ctx, w); err != nil {
		return r.res, err
	}
	r.res.AgentPeakRSS = (w.nodesEnd.PeakRSSBytes - rssBefore) / int64(len(r.insts))
	if err := r.report(ctx, w); err != nil {
		return r.res, err
	}
	res := r.res
	r.progress("done: %d/%d placed, completion %.1fs simulated (%.2f x bound), %d throttled",
		res.Placed, res.Pods, res.CompletionSim, res.Ratio, res.Throttled)
	if cfg.UpDown != nil && r.af != nil {
		var udErr error
		r.res.UpDown, udErr = runUpDown(ctx, upDownEnv{cfg: cfg, admin: r.cloud.admin, fleet: r.af, broker: r.broker,
			insts: r.insts, limits: r.limits, share: r.lbShare, pods: w.pods}, r.progress)
		return r.res, udErr
	}
	return r.res, nil
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
	if res.IMDSBoundSim > 0 {
		res.RatioIMDS = res.CompletionSim / res.IMDSBoundSim
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
