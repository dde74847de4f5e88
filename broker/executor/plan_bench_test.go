package executor

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/instances"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/ratelimit/ratelimittest"
	"github.com/allotnet/allot/broker/store"
)

// limitedEC2 is an EC2 client that does nothing but show its limiter: a
// round's planning reads the buckets and never calls.
type limitedEC2 struct {
	EC2
	lim *ratelimit.Limiter
}

func (c limitedEC2) Limiter() *ratelimit.Limiter { return c.lim }

// burstState is the state of a round in the middle of a burst of nodes
// c5.xlarge nodes over three subnets: every node holds its primary ENI
// and, one node in three, a second one half full; every one has 30 pods
// waiting and its warm target short by 14, stated long enough ago to be
// planned; the buckets hold no token.
func burstState(nodes int) (*Engine, *snapshot) {
	return burstStateAt(nodes, ratelimittest.NewManualClock(time.Now()))
}

// burstStateAt is burstState with the limiter on clk: the buckets refill
// only as the test advances it.
func burstStateAt(nodes int, clk *ratelimittest.ManualClock) (*Engine, *snapshot) {
	lim := ratelimit.New(ratelimit.Config{Share: 1, TimeScale: 5, Clock: clk})
	for _, a := range []string{planner.CallAssign, planner.CallCreate, planner.CallAttach, planner.CallModify} {
		lim.Drain(ratelimit.ClassOf(a, true))
	}
	cfg := Config{Cluster: "bench", Logger: slog.New(slog.DiscardHandler)}
	cfg.defaults()
	e := &Engine{cfg: cfg, log: cfg.Logger, unmet: newUnmetBook(cfg.Logger, cfg.StatusHold),
		ec2: limitedEC2{lim: lim}, inst: instances.New(nil, nil, cfg.Interval), stats: newStats()}
	s := newSnapshot()
	s.demands = map[string]store.Demand{}
	long := time.Now().Add(-time.Hour)
	var enis []store.ENI
	for i := range nodes {
		id := fmt.Sprintf("i-%017x", i*7919)
		subnet := fmt.Sprintf("subnet-%d", i%3)
		n := store.Node{InstanceID: id, InstanceType: "c5.xlarge", SubnetID: subnet, Mode: "secondary-ip",
			SecurityGroups: []string{"sg-1"}, MaxENIs: 4, IPv4PerENI: 15, WarmIPTarget: 14, Rev: int64(i + 1)}
		s.nodes = append(s.nodes, n)
		s.node[id] = n
		enis = append(enis, store.ENI{ID: fmt.Sprintf("eni-%d-0", i), InstanceID: id, SubnetID: subnet, Primary: true,
			Status: store.ENIAttached, Addresses: []string{fmt.Sprintf("10.%d.%d.%d", i%3, i/250, i%250)}})
		known := 1
		if i%3 == 0 {
			x := store.ENI{ID: fmt.Sprintf("eni-%d-1", i), InstanceID: id, SubnetID: subnet, DeviceIndex: 1, Status: store.ENIAttached}
			for k := range 7 {
				x.Addresses = append(x.Addresses, fmt.Sprintf("10.%d.%d.%d", i%3, i/250, 100+k))
			}
			enis = append(enis, x)
			known += 7
		}
		s.demands[id] = store.Demand{InstanceID: id, Pending: 30, WarmShortfall: 14, Known: known, HasKnown: true, UpdatedAt: long}
	}
	for k := range 3 {
		id := fmt.Sprintf("subnet-%d", k)
		s.subnets[id] = store.Subnet{ID: id, CIDR: fmt.Sprintf("10.%d.0.0/14", k), Usable: 1 << 18}
	}
	s.fill(enis, nil, nil)
	return e, s
}

// BenchmarkPlanRound times one round's planning (Engine.plan) in the
// middle of a burst, at 1,000 and 5,000 nodes: what a round costs that
// grows with the cluster.
func BenchmarkPlanRound(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		b.Run(fmt.Sprint(nodes), func(b *testing.B) {
			e, snap := burstState(nodes)
			free := func(string) bool { return true }
			planned := 0
			// What a round keeps for the next (the nodes' views) carries
			// over; the actions queued do not, so every round finds the
			// same room in the buckets.
			memo := nodeMemo{}
			b.ResetTimer()
			for range b.N {
				rs := newRunState(func(error) {})
				rs.nodes = memo
				e.plan(rs, snap, nil, free, e.cfg.Clock.Now())
				planned = rs.q.items.Len()
			}
			b.ReportMetric(float64(planned), "actions/round")
		})
	}
}

// BenchmarkRoundWalk times a round's planning and release proposals in
// the middle of a burst at 5,000 nodes while workers take the run state's
// lock as their calls do, with whether each node is idle asked under that
// lock node by node (as rounds did) or read once (notIdle).
func BenchmarkRoundWalk(b *testing.B) {
	for _, once := range []bool{false, true} {
		b.Run(map[bool]string{false: "per-node", true: "once"}[once], func(b *testing.B) {
			e, snap := burstState(5000)
			memo := nodeMemo{}
			stop := make(chan struct{})
			var workers sync.WaitGroup
			rs := newRunState(func(error) {})
			for range 8 {
				workers.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						rs.mu.Lock()
						rs.busy["i-worker"]++
						rs.mu.Unlock()
						runtime.Gosched()
					}
				})
			}
			b.ResetTimer()
			for range b.N {
				rs.nodes, rs.wanting = memo, map[string]time.Time{}
				now := e.cfg.Clock.Now()
				free := func(n string) bool { return rs.idle(n, now) }
				if once {
					notIdle := rs.notIdle(now)
					free = func(n string) bool { return !notIdle[n] }
				}
				e.plan(rs, snap, nil, free, now)
				e.proposeReleases(context.Background(), rs, snap, free, now, false)
				rs.q = newQueue()
			}
			b.StopTimer()
			close(stop)
			workers.Wait()
		})
	}
}
