package executor_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/planner"
)

func TestZZBig(t *testing.T) {
	if os.Getenv("ZZBIG") == "" {
		t.Skip()
	}
	const nodes, pending = 500, 46
	e := newEnv(t, envOpts{nodes: nodes, instanceType: "c5.xlarge"})
	want := map[string]int{}
	for _, inst := range e.insts {
		e.register(t, inst, pending, 0, nil)
		want[inst.ID] = pending
	}
	var first planner.Plan
	n := 0
	began := time.Now()
	r := e.start(t, executor.Config{OnPlan: func(p planner.Plan) {
		if n == 0 {
			first = p
		}
		n++
	}})
	ctx := context.Background()
	last := time.Now()
	waitFor(t, "all", 600*time.Second, func() (bool, error) {
		ok, err := e.satisfied(ctx, want)
		if time.Since(last) > 5*time.Second {
			last = time.Now()
			t.Logf("%v: %v stats %+v", time.Since(began), err, r.eng.Stats())
		}
		return ok, err
	})
	took := time.Since(began)
	r.stop(t)
	mc := planner.MinCalls(first)
	t.Logf("took %v, bound %v, plans %d, min %v, counters %v, stats %+v writes %v", took, planner.LowerBound(mc, share, timeScale), n, mc, e.sim.Counters(), r.eng.Stats(), e.st.Writes())
}
