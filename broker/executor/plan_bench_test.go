package executor

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
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
		s.demands.set(id, store.Demand{InstanceID: id, Pending: 30, WarmShortfall: 14, Known: known, HasKnown: true, UpdatedAt: long})
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
//
// In "/copies" every record holds its own copy of the IDs it names, as
// records decoded from etcd did before the store shared them (store's
// intern): a map then compares the ID it is asked for with its key byte by
// byte instead of by pointer.
func BenchmarkPlanRound(b *testing.B) {
	for _, c := range []struct {
		nodes  int
		copies bool
	}{{1000, false}, {5000, false}, {5000, true}} {
		name := fmt.Sprint(c.nodes)
		if c.copies {
			name += "/copies"
		}
		nodes := c.nodes
		b.Run(name, func(b *testing.B) {
			e, snap := burstState(nodes)
			if c.copies {
				copyIDs(snap)
			}
			free := func(string) bool { return true }
			planned := 0
			// What a round keeps for the next (the nodes' views, the
			// wanting nodes' list) carries over; the actions queued do
			// not, so every round finds the same room in the buckets.
			kept := newRunState(func(error) {})
			b.ResetTimer()
			for range b.N {
				rs := newRunState(func(error) {})
				rs.nodes, rs.wanting, rs.wantingBuf, rs.wantsBuf = kept.nodes, kept.wanting, kept.wantingBuf, kept.wantsBuf
				e.plan(rs, snap, nil, free, e.cfg.Clock.Now())
				planned, kept = rs.q.items.Len(), rs
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

// copyIDs gives every record and map key of s its own copy of the IDs it
// holds.
func copyIDs(s *snapshot) {
	for i := range s.nodes {
		s.nodes[i].InstanceID = strings.Clone(s.nodes[i].InstanceID)
		s.nodes[i].SubnetID = strings.Clone(s.nodes[i].SubnetID)
		s.nodes[i].InstanceType = strings.Clone(s.nodes[i].InstanceType)
	}
	node := map[string]store.Node{}
	for id, n := range s.node {
		node[strings.Clone(id)] = n
	}
	demands := map[string]store.Demand{}
	for id, d := range s.demands.all() {
		d.InstanceID = strings.Clone(d.InstanceID)
		demands[strings.Clone(id)] = d
	}
	byNode := map[string][]store.ENI{}
	for id, l := range s.byNode.all() {
		c := slices.Clone(l)
		for k := range c {
			c[k].ID, c[k].InstanceID, c[k].Status = strings.Clone(c[k].ID), strings.Clone(c[k].InstanceID), strings.Clone(c[k].Status)
		}
		byNode[strings.Clone(id)] = c
	}
	s.node, s.demands, s.byNode = node, shardsOf(demands), shardsOf(byNode)
}
