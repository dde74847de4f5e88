package executor_test

import (
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/planner"
)

// TestNaivePolicy: under the naive policy (the benchmark's yardstick) a
// node that needs more than its primary ENI holds gets its primary filled
// and an empty new ENI, which a later plan fills once it is attached: every
// node ends with what it asked for, through an Assign per ENI and a
// CreateAttach of no addresses per new ENI.
func TestNaivePolicy(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 3, instanceType: "c5.xlarge"})
	want := map[string]int{}
	for _, inst := range e.insts {
		e.register(t, inst, 20, 0, nil)
		want[inst.ID] = 20
	}
	var mu sync.Mutex
	var plans []planner.Plan
	r := e.start(t, executor.Config{Gather: time.Millisecond, PlanPolicy: planner.Naive, Logger: plansTo(func(p planner.Plan) {
		mu.Lock()
		plans = append(plans, p)
		mu.Unlock()
	})})
	ctx := ctxT(t)
	waitFor(t, "every node served", 60*time.Second, func() (bool, error) { return e.satisfied(ctx, want) })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	assigns, creates := map[string]int{}, map[string]int{}
	for _, p := range plans {
		for _, a := range p.Actions {
			switch a.Kind {
			case planner.CreateAttach:
				creates[a.InstanceID]++
				if a.Count != 0 {
					t.Errorf("%s: new ENI planned with %d addresses, want it empty", a.InstanceID, a.Count)
				}
			case planner.Assign:
				assigns[a.InstanceID]++
			}
		}
	}
	for _, inst := range e.insts {
		if creates[inst.ID] != 1 || assigns[inst.ID] != 2 {
			t.Errorf("%s: %d new ENIs and %d Assigns, want 1 and 2 (the primary, then the new ENI)", inst.ID, creates[inst.ID], assigns[inst.ID])
		}
	}
	e.checkNoDuplicates(t)
	e.checkMatchesEC2(t)
}
