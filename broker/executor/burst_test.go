package executor_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/bench/lowerbound"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/planner"
)

// mutating are the EC2 actions that change state; the engine's calls of
// these must be exactly what the plan costs.
var mutating = []string{
	"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute",
	"AssignPrivateIpAddresses", "UnassignPrivateIpAddresses", "DetachNetworkInterface", "DeleteNetworkInterface",
}

// TestBurst50Nodes: 50 nodes, their instance facts recorded, ask at once
// for 25 addresses each (20 pods waiting, 5 warm). The engine's first plan
// covers them all; carrying it
// out takes exactly the plan's minimum of mutating calls, none throttled
// (100 attaches exceed the attach bucket's 50, so the client-side buckets
// must pace them), and leaves EC2 and etcd in agreement.
func TestBurst50Nodes(t *testing.T) {
	const nodes, pending, warm = 50, 20, 5
	e := newEnv(t, envOpts{nodes: nodes})
	want := map[string]int{}
	for _, inst := range e.insts {
		e.register(t, inst, 0, 0, nil)
		want[inst.ID] = pending + warm
	}
	// The nodes' instance facts (their types' limits, their primary ENIs)
	// are described and recorded apart from the rounds, and a node is
	// planned once they are in: as when nodes join before their pods come,
	// an engine records them first, with no demand stated.
	e.recordFacts(t)
	for _, inst := range e.insts {
		e.demand(t, inst.ID, pending, warm)
	}

	var mu sync.Mutex
	var plans []planner.Plan
	began := time.Now()
	// Every demand is stored before the engine starts, so there is
	// nothing to gather (TestGather covers it); a demand stored in the last
	// Gather before the start would otherwise wait for a second plan.
	r := e.start(t, executor.Config{Gather: time.Millisecond, RoundCPU: true, Logger: plansTo(func(p planner.Plan) {
		mu.Lock()
		plans = append(plans, p)
		mu.Unlock()
	})})
	ctx := ctxT(t)
	waitFor(t, "all 50 nodes satisfied", 60*time.Second, func() (bool, error) { return e.satisfied(ctx, want) })
	took := time.Since(began)
	// A few more rounds: nothing further may be planned or sent.
	time.Sleep(300 * time.Millisecond)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(plans) != 1 {
		for i, p := range plans {
			t.Logf("plan %d: %d actions, calls %v, unmet %v", i, len(p.Actions), lowerbound.MinCalls(p), p.Unmet)
			for _, a := range p.Actions[:min(len(p.Actions), 3)] {
				t.Logf("  %+v", a)
			}
		}
		t.Fatalf("engine made %d plans; want exactly one for one burst", len(plans))
	}
	first := plans[0]
	if len(first.Unmet) != 0 {
		t.Errorf("first plan left demand unmet: %v", first.Unmet)
	}
	planned := map[string]bool{}
	for _, a := range first.Actions {
		planned[a.InstanceID] = true
	}
	if len(planned) != nodes {
		t.Errorf("first plan covers %d nodes, want %d", len(planned), nodes)
	}
	minCalls := lowerbound.MinCalls(first)
	got := e.sim.Counters()
	for _, action := range mutating {
		if int(got[action].Calls) != minCalls[action] {
			t.Errorf("%s: %d calls, plan's minimum %d", action, got[action].Calls, minCalls[action])
		}
	}
	for action, c := range got {
		if c.Throttled != 0 || c.Errors != 0 {
			t.Errorf("%s: %d throttled (RequestLimitExceeded), %d errors; want none", action, c.Throttled, c.Errors)
		}
	}
	// EC2 is the ground truth: every node has its primary plus two new ENIs,
	// tagged, deleted with the instance, holding the 25 secondary addresses
	// asked for and 2 more: new ENIs are created full (9 on m5.large), as
	// the nodes' warm targets count ENIs.
	for _, inst := range e.insts {
		cur, _ := e.sim.World().Instance(inst.ID)
		total := 0
		for _, x := range cur.NetworkInterfaces {
			total += len(x.SecondaryIPs)
			if x.Attachment.DeviceIndex == 0 {
				continue
			}
			if !x.Attachment.DeleteOnTermination {
				t.Errorf("%s: ENI %s not DeleteOnTermination", inst.ID, x.ID)
			}
			for _, k := range []string{ec2client.TagCluster, ec2client.TagInstanceID, ec2client.TagCreatedAt, ec2client.TagOwner, executor.TagClientToken} {
				if x.Tags[k] == "" {
					t.Errorf("%s: ENI %s lacks tag %s", inst.ID, x.ID, k)
				}
			}
			if x.Tags[ec2client.TagInstanceID] != inst.ID {
				t.Errorf("ENI %s tagged for %s, attached to %s", x.ID, x.Tags[ec2client.TagInstanceID], inst.ID)
			}
		}
		if len(cur.NetworkInterfaces) != 3 || total != 3*9 {
			t.Errorf("%s: %d ENIs with %d addresses; want 3 ENIs with %d", inst.ID, len(cur.NetworkInterfaces), total, 3*9)
		}
	}
	e.checkNoDuplicates(t)
	e.checkMatchesEC2(t)
	e.checkAccounts(t)
	st := r.eng.Stats()
	// Rounds plan from the followed view. A full read is the fallback
	// when the watch lags the engine's own writes by a second, which a
	// starved machine may see now and then, not as a rule.
	if st.FullReads*10 > st.Rounds {
		t.Errorf("%d of %d rounds read the whole state from etcd, want few", st.FullReads, st.Rounds)
	}
	// With RoundCPU the loop keeps its thread and the rounds' CPU time is
	// read (on Linux, which has the thread's clock): some, and never more
	// than their wall time.
	if runtime.GOOS == "linux" {
		var counted int64
		for _, n := range st.RoundCPUHist {
			counted += n
		}
		if st.RoundCPU <= 0 || st.RoundCPU > st.RoundTime || counted != st.Rounds {
			t.Errorf("%d rounds ran %v of CPU in %v of wall time, %d counted by CPU", st.Rounds, st.RoundCPU, st.RoundTime, counted)
		}
	}
	bound := lowerbound.LowerBound(minCalls, share, timeScale)
	t.Logf("50 nodes satisfied in %v (x%d time scale; the bucket model's lower bound is %v): mutating calls %v; describes: types %d, subnets %d, ENIs %d; stats %+v",
		took, timeScale, bound, minCalls, got["DescribeInstanceTypes"].Calls, got["DescribeSubnets"].Calls, got["DescribeNetworkInterfaces"].Calls, st)
}

// recordFacts runs an engine until every node's limits and primary ENI are
// recorded, then stops it.
func (e *env) recordFacts(t *testing.T) {
	t.Helper()
	r := e.start(t, executor.Config{})
	ctx := ctxT(t)
	waitFor(t, "every node's instance facts recorded", 30*time.Second, func() (bool, error) {
		nodes, err := e.st.ListNodes(ctx)
		if err != nil {
			return false, err
		}
		enis, err := e.st.ListENIs(ctx)
		if err != nil {
			return false, err
		}
		primary := map[string]bool{}
		for _, x := range enis {
			if x.Primary {
				primary[x.InstanceID] = true
			}
		}
		for _, n := range nodes {
			if n.IPv4PerENI == 0 || n.MaxENIs == 0 || !primary[n.InstanceID] {
				return false, nil
			}
		}
		return len(nodes) == len(e.insts), nil
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
