package executor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// TestDeposedEngineStops: an engine whose context carries a fence on an
// election key it no longer holds (its lease ended before the keepalive
// noticed) has its first write refused, calls EC2 for nothing, and Run
// returns rpcerr.ErrNotLeader on its own.
func TestDeposedEngineStops(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 1})
	inst := e.insts[0]
	ctx := ctxT(t)
	if _, err := e.st.PutSubnet(ctx, store.Subnet{ID: subnetID, CIDR: "10.0.0.0/17", AvailabilityZone: "us-east-1a", VPCID: inst.VPCID, Usable: 32768 - 5}); err != nil {
		t.Fatal(err)
	}
	e.register(t, inst, 5, 0, nil)

	// The key was never created, so no create revision matches: the state
	// of a leader whose lease was revoked and key deleted.
	fenced := store.WithFence(context.Background(), e.st.ElectionPrefix()+"/gone", 1)
	eng := executor.New(executor.Config{Cluster: cluster, Store: e.st, EC2: e.ec2, Logger: quiet(),
		Interval: 100 * time.Millisecond, FailureBackoff: 100 * time.Millisecond})
	runCtx, cancel := context.WithCancel(fenced)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- eng.Run(runCtx) }()
	select {
	case err := <-done:
		if !errors.Is(err, rpcerr.ErrNotLeader) {
			t.Fatalf("Run returned %v, want ErrNotLeader", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("deposed engine kept running")
	}
	for _, action := range mutating {
		if c := e.sim.Counters()[action].Calls; c != 0 {
			t.Errorf("%s called %d times by a deposed engine", action, c)
		}
	}
	all, err := e.st.ListIntents(ctx)
	if err != nil || len(all) != 0 {
		t.Errorf("intents written by a deposed engine: %v (%v)", all, err)
	}
}
