package executor_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/reconciler"
	"github.com/allotnet/allot/broker/store"
)

// TestCrashAndRestart kills the engine right after an EC2 call returns and
// before its result is recorded, then starts a new engine on the same etcd
// and EC2. The new one must resolve the open intent from what EC2 shows and
// finish: one ENI, attached, nothing leaked, no address twice, every EC2
// call made exactly once (the crashed call is not repeated), and the
// demand not planned a second time.
func TestCrashAndRestart(t *testing.T) {
	cases := []struct {
		name        string
		crashAfter  string
		primaryFull bool // only a new ENI can serve the demand
		pending     int
		consistency time.Duration
		wantCalls   map[string]int64
		wantENIs    int
	}{
		{
			name: "after create", crashAfter: "CreateNetworkInterface", primaryFull: true, pending: 5,
			wantCalls: map[string]int64{"CreateNetworkInterface": 1, "AttachNetworkInterface": 1, "ModifyNetworkInterfaceAttribute": 1},
			wantENIs:  1,
		},
		{
			name: "after attach", crashAfter: "AttachNetworkInterface", primaryFull: true, pending: 5,
			wantCalls: map[string]int64{"CreateNetworkInterface": 1, "AttachNetworkInterface": 1, "ModifyNetworkInterfaceAttribute": 1},
			wantENIs:  1,
		},
		{
			name: "after modify", crashAfter: "ModifyNetworkInterfaceAttribute", primaryFull: true, pending: 5,
			wantCalls: map[string]int64{"CreateNetworkInterface": 1, "AttachNetworkInterface": 1, "ModifyNetworkInterfaceAttribute": 1},
			wantENIs:  1,
		},
		{
			name: "after assign", crashAfter: "AssignPrivateIpAddresses", pending: 5,
			wantCalls: map[string]int64{"AssignPrivateIpAddresses": 1},
		},
		{
			// Describe hides the new ENI for a simulated minute: the new
			// engine repeats the create with the same ClientToken, and EC2
			// answers with the ENI the first call made.
			name: "after create, describe lagging", crashAfter: "CreateNetworkInterface", primaryFull: true, pending: 5,
			consistency: time.Minute,
			wantCalls:   map[string]int64{"CreateNetworkInterface": 2, "AttachNetworkInterface": 1, "ModifyNetworkInterfaceAttribute": 1},
			wantENIs:    1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{nodes: 1, consistency: tc.consistency})
			inst := e.insts[0]
			ctx := ctxT(t)
			if tc.primaryFull {
				if _, err := e.ec2.AssignAddresses(ctx, inst.NetworkInterfaces[0].ID, 9, false); err != nil {
					t.Fatalf("fill primary ENI: %v", err)
				}
			}
			e.sim.ResetCounters()
			e.register(t, inst, tc.pending, 0, nil)
			want := map[string]int{inst.ID: tc.pending}
			if tc.primaryFull {
				want[inst.ID] += 9
			}

			runCtx, crash := context.WithCancelCause(context.Background())
			defer crash(nil)
			first := e.startIn(t, runCtx, executor.Config{EC2: &crashingEC2{Client: e.ec2, action: tc.crashAfter, crash: crash}})
			select {
			case <-first.done:
				if !errors.Is(first.err, errInjectedCrash) {
					t.Fatalf("first engine: Run returned %v, want the injected crash", first.err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("first engine did not crash")
			}
			open, err := e.st.ListOpenIntents(ctx)
			if err != nil || len(open) != 1 {
				t.Fatalf("after the crash: open intents %+v (%v), want exactly the interrupted one", open, err)
			}

			second := e.start(t, executor.Config{})
			waitFor(t, "the second engine to finish", 20*time.Second, func() (bool, error) { return e.satisfied(ctx, want) })
			time.Sleep(300 * time.Millisecond) // a few more rounds: nothing more may happen
			if err := second.stop(t); err != nil {
				t.Fatalf("second engine: %v", err)
			}

			got := e.sim.Counters()
			for _, action := range mutating {
				if got[action].Calls != tc.wantCalls[action] {
					t.Errorf("%s: %d calls, want %d", action, got[action].Calls, tc.wantCalls[action])
				}
			}
			st := second.eng.Stats()
			if st.Resolved < 1 || st.Plans != 0 {
				t.Errorf("second engine resolved %d intents and made %d plans; want the open intent resolved and no new plan", st.Resolved, st.Plans)
			}
			ours := e.ours()
			if len(ours) != tc.wantENIs {
				t.Fatalf("%d ENIs of ours in EC2, want %d", len(ours), tc.wantENIs)
			}
			for _, x := range ours {
				if x.Attachment == nil || x.Attachment.InstanceID != inst.ID || x.Attachment.DeviceIndex != 1 || !x.Attachment.DeleteOnTermination {
					t.Errorf("ENI %s: attachment %+v; want attached to %s at index 1, deleted on termination", x.ID, x.Attachment, inst.ID)
				}
			}
			e.checkNoDuplicates(t)
			e.checkMatchesEC2(t)
			e.checkAccounts(t)

			rep, err := reconciler.New(reconciler.Config{Cluster: cluster, Store: e.st, EC2: e.ec2}).Check(ctx)
			if err != nil {
				t.Fatalf("reconciler check: %v", err)
			}
			kinds := []string{reconciler.KindLeakedENI, reconciler.KindMissingENI, reconciler.KindAddressDrift, reconciler.KindAttachmentDrift}
			if tc.consistency > 0 {
				kinds = kinds[:1] // Describe does not show the new ENI yet: rightly "missing" for now
			}
			for _, kind := range kinds {
				if n := rep.Count(kind); n != 0 {
					t.Errorf("reconciler finds %d %s: %+v", n, kind, rep.Findings)
				}
			}
			enis, _ := e.st.ListENIs(ctx)
			for _, x := range enis {
				if !x.Primary && x.Status != store.ENIAttached {
					t.Errorf("ENI record %s has status %s, want attached", x.ID, x.Status)
				}
			}
		})
	}
}

// errInjectedCrash is the cause a crashingEC2 stops the engine with.
var errInjectedCrash = errors.New("injected crash")

// crashingEC2 is the EC2 client with a crash after one call: the first
// time the named action returns, it cancels the engine's run (as if the
// process died right then) and hands the engine an error instead of EC2's
// answer, so the call's result is never recorded. The engine's own code
// has no idea it is being crashed.
type crashingEC2 struct {
	*ec2client.Client
	action string
	crash  context.CancelCauseFunc
	fired  atomic.Bool
}

var _ executor.EC2 = (*crashingEC2)(nil)

// after passes err on, or crashes after action.
func (c *crashingEC2) after(action string, err error) error {
	if action != c.action || !c.fired.CompareAndSwap(false, true) {
		return err
	}
	c.crash(errInjectedCrash)
	return fmt.Errorf("%w after %s", errInjectedCrash, action)
}

func (c *crashingEC2) CreateENI(ctx context.Context, in ec2client.CreateENIInput) (ec2client.ENIInfo, error) {
	x, err := c.Client.CreateENI(ctx, in)
	return x, c.after("CreateNetworkInterface", err)
}

func (c *crashingEC2) AttachENI(ctx context.Context, eniID, instanceID string, deviceIndex int) (string, error) {
	id, err := c.Client.AttachENI(ctx, eniID, instanceID, deviceIndex)
	return id, c.after("AttachNetworkInterface", err)
}

func (c *crashingEC2) SetDeleteOnTermination(ctx context.Context, eniID, attachmentID string, on bool) error {
	return c.after("ModifyNetworkInterfaceAttribute", c.Client.SetDeleteOnTermination(ctx, eniID, attachmentID, on))
}

func (c *crashingEC2) AssignAddresses(ctx context.Context, eniID string, count int, prefixes bool) ([]string, error) {
	added, err := c.Client.AssignAddresses(ctx, eniID, count, prefixes)
	return added, c.after("AssignPrivateIpAddresses", err)
}

func (c *crashingEC2) UnassignAddresses(ctx context.Context, eniID string, addrs, prefixes []string) error {
	return c.after("UnassignPrivateIpAddresses", c.Client.UnassignAddresses(ctx, eniID, addrs, prefixes))
}

func (c *crashingEC2) DetachENI(ctx context.Context, attachmentID string, force bool) error {
	return c.after("DetachNetworkInterface", c.Client.DetachENI(ctx, attachmentID, force))
}

func (c *crashingEC2) DeleteENI(ctx context.Context, eniID string) error {
	return c.after("DeleteNetworkInterface", c.Client.DeleteENI(ctx, eniID))
}
