package executor_test

import (
	"testing"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/broker/executor"
)

// TestAttachRetriedOnSameENI: with EC2 answering 30% of the attaches with
// InternalError, a failed attach is retried on the ENI already created,
// not answered by deleting it and creating another. Three m5.large nodes
// each need two new ENIs: exactly six Creates, no Delete, and the ENIs
// every node ends with are the ones created.
func TestAttachRetriedOnSameENI(t *testing.T) {
	const nodes, pending = 3, 27 // the primary ENI and two new ones, 9 addresses each
	e := newEnv(t, envOpts{nodes: nodes})
	e.sim.SetFaults(map[string]awssim.Fault{
		"AttachNetworkInterface": {ErrorRate: 0.3, ErrorCode: "InternalError"},
	})
	want := map[string]int{}
	for _, inst := range e.insts {
		e.register(t, inst, pending, 0, nil)
		want[inst.ID] = pending
	}
	r := e.start(t, executor.Config{Gather: time.Millisecond})
	ctx := ctxT(t)
	waitFor(t, "every node satisfied", 60*time.Second, func() (bool, error) { return e.satisfied(ctx, want) })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	got := e.sim.Counters()
	attach := got["AttachNetworkInterface"]
	t.Logf("attaches: %d calls, %d failed; creates %d, deletes %d",
		attach.Calls, attach.Errors, got["CreateNetworkInterface"].Calls, got["DeleteNetworkInterface"].Calls)
	if attach.Errors == 0 {
		t.Fatalf("no attach failed (%d calls); the fault rate did not apply and the test proves nothing", attach.Calls)
	}
	if c := got["CreateNetworkInterface"].Calls; c != 2*nodes {
		t.Errorf("%d CreateNetworkInterface calls for %d ENIs; a failed attach must not cost a new ENI", c, 2*nodes)
	}
	if d := got["DeleteNetworkInterface"].Calls; d != 0 {
		t.Errorf("%d DeleteNetworkInterface calls; an ENI whose attach failed with a server error must be kept and retried", d)
	}
	if a := attach.Calls - attach.Errors; a != 2*nodes {
		t.Errorf("%d attaches succeeded, want %d", a, 2*nodes)
	}
	e.checkNoDuplicates(t)
	e.checkMatchesEC2(t)
	e.checkAccounts(t)
}
