package executor_test

import (
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
)

// TestRefusalThatWouldRepeatBacksOff: EC2 refusing every attach with
// InvalidParameterCombination (an ENI and an instance in different zones)
// costs one attempt, then a long back-off with the reason published as the
// node's status, never a Create/Attach/Delete loop.
func TestRefusalThatWouldRepeatBacksOff(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 1})
	e.sim.SetFaults(map[string]awssim.Fault{
		"AttachNetworkInterface": {ErrorRate: 1, ErrorCode: "InvalidParameterCombination"},
	})
	inst := e.insts[0]
	e.register(t, inst, 12, 0, nil)
	e.start(t, executor.Config{Gather: time.Millisecond})
	ctx := ctxT(t)
	var st store.NodeStatus
	waitFor(t, "an ec2_refused status", 30*time.Second, func() (bool, error) {
		all, err := e.st.ListNodeStatus(ctx)
		st = all[inst.ID]
		return st.Reason == store.UnmetEC2Refused, err
	})
	if !strings.Contains(st.Message, "InvalidParameterCombination") {
		t.Errorf("status message %q does not say what EC2 said", st.Message)
	}
	// With the old 100 ms failure back-off this was a loop of ~3 mutating
	// calls every round trip; now the node waits minutes.
	time.Sleep(3 * time.Second)
	got := e.sim.Counters()
	if c := got["CreateNetworkInterface"].Calls; c != 1 {
		t.Errorf("%d CreateNetworkInterface calls in 3 s of refusals, want 1", c)
	}
	if a := got["AttachNetworkInterface"].Calls; a > 2 {
		t.Errorf("%d AttachNetworkInterface calls, want at most 2", a)
	}
}
