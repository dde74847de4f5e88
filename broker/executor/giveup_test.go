package executor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
)

// ackAll waits for the proposal of the second ENI's six addresses (pods
// hold two of the primary's) and acknowledges all of them.
func (s *releaseSetup) ackAll(t *testing.T) store.Release {
	t.Helper()
	s.report(t, 1, s.primary.Addresses[:2])
	rel := s.proposal(t)
	if rel.ENIID != s.eni.ID || !sameSet(rel.Addresses, s.eni.Addresses) {
		t.Fatalf("proposal %+v; want all of %s's %v", rel, s.eni.ID, s.eni.Addresses)
	}
	if _, err := s.e.st.AckRelease(ctxT(t), s.node, rel.ID, rel.Addresses, nil); err != nil {
		t.Fatalf("ack: %v", err)
	}
	return rel
}

// waitGivenUp waits until the second ENI is gone from EC2 and from the
// records and its release is done.
func (s *releaseSetup) waitGivenUp(t *testing.T, rel store.Release) {
	t.Helper()
	ctx := ctxT(t)
	waitFor(t, "the ENI given up and its release done", 20*time.Second, func() (bool, error) {
		_, inEC2 := s.e.sim.World().NetworkInterface(s.eni.ID)
		if _, err := s.e.st.GetENI(ctx, s.eni.ID); err == nil || inEC2 {
			return false, err
		}
		r, err := s.e.st.GetRelease(ctx, rel.ID)
		return r.State == store.ReleaseDone, err
	})
}

// wantCalls checks the release's mutating calls.
func (s *releaseSetup) wantCalls(t *testing.T, unassign, detach, del int64) {
	t.Helper()
	c := s.e.sim.Counters()
	for action, n := range map[string]int64{"UnassignPrivateIpAddresses": unassign, "DetachNetworkInterface": detach, "DeleteNetworkInterface": del} {
		if c[action].Calls != n {
			t.Errorf("%s: %d calls, want %d", action, c[action].Calls, n)
		}
	}
}

// TestReleaseWholeENI: a release that covers every address of a secondary
// ENI, none held by a pod, gives the ENI back by DetachNetworkInterface and
// DeleteNetworkInterface alone: deleting it frees its addresses, so no
// UnassignPrivateIpAddresses is sent. The ENI's record and the release's
// open state go together, the primary ENI is untouched, and the subnet's
// accounts match the records.
func TestReleaseWholeENI(t *testing.T) {
	s := newReleaseSetup(t, executor.Config{})
	rel := s.ackAll(t)
	s.waitGivenUp(t, rel)
	if err := s.r.stop(t); err != nil {
		t.Fatal(err)
	}
	s.wantCalls(t, 0, 1, 1)
	if got, _ := s.e.ec2Addresses(s.primary.ID); !sameSet(got, s.primary.Addresses) {
		t.Errorf("primary ENI changed: %v", got)
	}
	if n := s.r.eng.Stats().Released; n != int64(len(s.eni.Addresses)) {
		t.Errorf("released %d addresses, want %d", n, len(s.eni.Addresses))
	}
	s.e.checkMatchesEC2(t)
	s.e.checkAccounts(t)
}

// TestReleaseWholeENIRefused: when EC2 shows the ENI differently from the
// record, so that deleting it would free what the agent never agreed to
// (an address the release does not cover) or delete an ENI allot did not
// create (its tags gone), the ENI is kept: the acknowledged addresses are
// unassigned instead, and nothing is detached or deleted.
func TestReleaseWholeENIRefused(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, s *releaseSetup) (keep []string)
	}{
		{
			name: "an address not in the release",
			change: func(t *testing.T, s *releaseSetup) []string {
				added, err := s.e.ec2.AssignAddresses(ctxT(t), s.eni.ID, 1, false)
				if err != nil {
					t.Fatalf("assign behind the broker's back: %v", err)
				}
				return added
			},
		},
		{
			name: "not tagged as this cluster's",
			change: func(t *testing.T, s *releaseSetup) []string {
				if err := s.e.sim.World().DeleteTags([]string{s.eni.ID}, []world.TagFilter{{Key: ec2client.TagCluster}}); err != nil {
					t.Fatalf("untag: %v", err)
				}
				return nil
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newReleaseSetup(t, executor.Config{})
			keep := tc.change(t, s)
			rel := s.ackAll(t)
			waitFor(t, "the release carried out", 20*time.Second, func() (bool, error) {
				r, err := s.e.st.GetRelease(ctxT(t), rel.ID)
				return r.State == store.ReleaseDone, err
			})
			time.Sleep(300 * time.Millisecond) // a few more rounds: nothing more may happen
			if err := s.r.stop(t); err != nil {
				t.Fatal(err)
			}
			s.wantCalls(t, 1, 0, 0)
			x, ok := s.e.sim.World().NetworkInterface(s.eni.ID)
			if !ok || x.Attachment == nil || !sameSet(x.SecondaryIPs, keep) {
				t.Errorf("ENI %s: exists %v, attachment %+v, addresses %v; want attached with exactly %v", s.eni.ID, ok, x.Attachment, x.SecondaryIPs, keep)
			}
			if rec, err := s.e.st.GetENI(ctxT(t), s.eni.ID); err != nil || rec.Status != store.ENIAttached || len(rec.Addresses) != 0 {
				t.Errorf("ENI record %+v (%v); want attached, its acknowledged addresses gone", rec, err)
			}
			s.e.checkAccounts(t)
		})
	}
}

// TestReleaseWholeENICrash: the leader dies right after the Detach, or
// right after the Delete, before recording it. The next leader finds the
// open intent that names the release, sees in EC2 what happened, and
// finishes: the ENI deleted once, no Unassign, the record and the release
// closed together, the accounts right.
func TestReleaseWholeENICrash(t *testing.T) {
	for _, action := range []string{"DetachNetworkInterface", "DeleteNetworkInterface"} {
		t.Run("after "+action, func(t *testing.T) {
			runCtx, crash := context.WithCancelCause(context.Background())
			defer crash(nil)
			s := newReleaseSetup(t, executor.Config{})
			// The engine that made the ENIs makes way for one that dies
			// after the call.
			if err := s.r.stop(t); err != nil {
				t.Fatal(err)
			}
			s.r = s.e.startIn(t, runCtx, executor.Config{ReleaseAfter: 200 * time.Millisecond, ReleaseMargin: 2,
				EC2: &crashingEC2{Client: s.e.ec2, action: action, crash: crash}})
			rel := s.ackAll(t)
			select {
			case <-s.r.done:
				if !errors.Is(s.r.err, errInjectedCrash) {
					t.Fatalf("first engine: Run returned %v, want the injected crash", s.r.err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("first engine did not crash")
			}
			ctx := ctxT(t)
			open, err := s.e.st.ListOpenIntents(ctx)
			if err != nil || len(open) != 1 || open[0].ReleaseID != rel.ID {
				t.Fatalf("after the crash: open intents %+v (%v), want the interrupted one naming release %s", open, err, rel.ID)
			}
			if r, _ := s.e.st.GetRelease(ctx, rel.ID); r.State != store.ReleaseAcked {
				t.Fatalf("release after the crash: %s, want still acknowledged", r.State)
			}
			second := s.e.start(t, executor.Config{ReleaseAfter: 200 * time.Millisecond, ReleaseMargin: 2})
			s.waitGivenUp(t, rel)
			time.Sleep(300 * time.Millisecond)
			if err := second.stop(t); err != nil {
				t.Fatalf("second engine: %v", err)
			}
			s.wantCalls(t, 0, 1, 1)
			if open, _ := s.e.st.ListOpenIntents(ctx); len(open) != 0 {
				t.Errorf("open intents left: %+v", open)
			}
			if st := second.eng.Stats(); st.Resolved < 1 {
				t.Errorf("second engine resolved %d intents, want the interrupted one", st.Resolved)
			}
			if got, _ := s.e.ec2Addresses(s.primary.ID); !sameSet(got, s.primary.Addresses) {
				t.Errorf("primary ENI changed: %v", got)
			}
			s.e.checkMatchesEC2(t)
			s.e.checkAccounts(t)
		})
	}
}
