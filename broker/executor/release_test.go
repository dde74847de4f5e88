package executor_test

import (
	"slices"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
)

// releaseSetup gives one node (warm IP target 2) its primary ENI full (9
// addresses) and a second ENI of 6, then drops its demand to nothing: 15
// addresses, 13 free by the agent's report once 2 primary addresses hold
// pods. inUse lists more addresses to report held (by index into the
// second ENI's addresses).
type releaseSetup struct {
	e            *env
	r            *running
	node         string
	primary, eni store.ENI
}

func newReleaseSetup(t *testing.T, cfg executor.Config) *releaseSetup {
	t.Helper()
	e := newEnv(t, envOpts{nodes: 1})
	inst := e.insts[0]
	e.register(t, inst, 0, 15, func(n *store.Node) { n.WarmIPTarget = 2 })
	cfg.ReleaseMargin = 2
	if cfg.ReleaseAfter == 0 {
		cfg.ReleaseAfter = 200 * time.Millisecond
	}
	r := e.start(t, cfg)
	ctx := ctxT(t)
	waitFor(t, "15 addresses", 20*time.Second, func() (bool, error) { return e.satisfied(ctx, map[string]int{inst.ID: 15}) })
	s := &releaseSetup{e: e, r: r, node: inst.ID}
	enis, err := e.st.ListNodeENIs(ctx, inst.ID)
	if err != nil || len(enis) != 2 {
		t.Fatalf("node ENIs: %+v (%v), want primary and one more", enis, err)
	}
	s.primary, s.eni = enis[0], enis[1]
	if len(s.primary.Addresses) != 9 || len(s.eni.Addresses) != 6 {
		t.Fatalf("primary has %d, second ENI %d addresses; want 9 and 6", len(s.primary.Addresses), len(s.eni.Addresses))
	}
	e.demand(t, inst.ID, 0, 0)
	e.sim.ResetCounters()
	return s
}

// report sends a usage report: assigned addresses held by pods, the rest of
// the node's addresses free, and all but 2 of them excess, as an agent with
// a warm IP target of 2 states it.
func (s *releaseSetup) report(t *testing.T, seq uint64, assigned []string) {
	t.Helper()
	var free []string
	for _, a := range append(slices.Clone(s.primary.Addresses), s.eni.Addresses...) {
		if !slices.Contains(assigned, a) {
			free = append(free, a)
		}
	}
	u := store.Usage{InstanceID: s.node, Seq: seq, Assigned: assigned, Free: free,
		Excess: max(len(free)-2, 0), HasExcess: true, UpdatedAt: time.Now()}
	if _, err := s.e.st.PutUsage(ctxT(t), u); err != nil {
		t.Fatalf("usage: %v", err)
	}
}

// proposal waits for an open release proposal for the node.
func (s *releaseSetup) proposal(t *testing.T) store.Release {
	t.Helper()
	var rel store.Release
	waitFor(t, "a release proposal", 20*time.Second, func() (bool, error) {
		rels, err := s.e.st.ListReleases(ctxT(t), s.node)
		for _, r := range rels {
			if r.State == store.ReleaseProposed {
				rel = r
				return true, nil
			}
		}
		return false, err
	})
	return rel
}

// ec2Addresses returns the secondary addresses EC2 shows on an ENI (nil if
// it does not exist).
func (e *env) ec2Addresses(id string) ([]string, bool) {
	x, ok := e.sim.World().NetworkInterface(id)
	return x.SecondaryIPs, ok
}

// TestReleaseNotAcknowledgedFreesNothing: a surplus leads to a proposal;
// while the agent does not answer, nothing is unassigned, no second
// proposal is stacked on it, and when it times out it is withdrawn.
func TestReleaseNotAcknowledgedFreesNothing(t *testing.T) {
	s := newReleaseSetup(t, executor.Config{ReleaseTimeout: 1500 * time.Millisecond})
	pods := s.primary.Addresses[:2]
	s.report(t, 1, pods)
	rel := s.proposal(t)
	if rel.ENIID != s.eni.ID || !sameSet(rel.Addresses, s.eni.Addresses) {
		t.Errorf("proposal %+v; want the 6 free addresses of the ENI without pods, %s", rel, s.eni.ID)
	}
	waitFor(t, "the unanswered proposal withdrawn", 20*time.Second, func() (bool, error) {
		return s.r.eng.Stats().Cancelled > 0, nil
	})
	if err := s.r.stop(t); err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"UnassignPrivateIpAddresses", "DetachNetworkInterface", "DeleteNetworkInterface"} {
		if c := s.e.sim.Counters()[action].Calls; c != 0 {
			t.Errorf("%s called %d times without an acknowledgement", action, c)
		}
	}
	for _, x := range []store.ENI{s.primary, s.eni} {
		got, ok := s.e.ec2Addresses(x.ID)
		if !ok || !sameSet(got, x.Addresses) {
			t.Errorf("ENI %s: EC2 has %v (exists %v), want all of %v", x.ID, got, ok, x.Addresses)
		}
	}
	rels, _ := s.e.st.ListReleases(ctxT(t), s.node)
	for _, r := range rels {
		if r.State != store.ReleaseProposed {
			t.Errorf("release %s is %s; nothing was acknowledged", r.ID, r.State)
		}
	}
	s.e.checkMatchesEC2(t)
	s.e.checkAccounts(t)
}

// TestReleaseAcknowledged: the agent acknowledges part of a proposal; only
// those addresses are unassigned, and the ENI, still holding a pod, stays.
// When later all its remaining addresses are acknowledged free, the ENI is
// detached and deleted.
func TestReleaseAcknowledged(t *testing.T) {
	s := newReleaseSetup(t, executor.Config{})
	ctx := ctxT(t)
	pod := s.eni.Addresses[0]
	s.report(t, 1, append(slices.Clone(s.primary.Addresses[:2]), pod))
	rel := s.proposal(t)
	if rel.ENIID != s.eni.ID || len(rel.Addresses) != 5 || slices.Contains(rel.Addresses, pod) {
		t.Fatalf("proposal %+v; want the 5 free addresses of %s, not the pod's %s", rel, s.eni.ID, pod)
	}
	acked := rel.Addresses[:4]
	if _, err := s.e.st.AckRelease(ctx, s.node, rel.ID, acked, nil); err != nil {
		t.Fatalf("ack: %v", err)
	}
	// Then the pod leaves, and the agent says so at once: before the
	// broker has carried out the release (EC2's Unassign and two writes of
	// its own), so the next proposal is made from this report. From the
	// last one it would propose the ENI's free fifth address alone, the pod
	// still on it.
	want := minus(s.eni.Addresses, acked)
	s.eni.Addresses = want
	s.report(t, 2, s.primary.Addresses[:2])
	waitFor(t, "the release carried out", 20*time.Second, func() (bool, error) {
		rels, err := s.e.st.ListReleases(ctx, s.node)
		for _, r := range rels {
			if r.ID == rel.ID {
				return r.State == store.ReleaseDone, err
			}
		}
		return false, err
	})
	if got, _ := s.e.ec2Addresses(s.eni.ID); !sameSet(got, want) {
		t.Errorf("EC2 has %v on %s; want exactly the unacknowledged %v", got, s.eni.ID, want)
	}
	if got, _ := s.e.ec2Addresses(s.primary.ID); !sameSet(got, s.primary.Addresses) {
		t.Errorf("primary ENI changed: %v", got)
	}
	c := s.e.sim.Counters()
	if c["UnassignPrivateIpAddresses"].Calls != 1 || c["DetachNetworkInterface"].Calls != 0 {
		t.Errorf("calls %v; want one unassign and no detach of an ENI holding a pod", c)
	}
	s.e.checkMatchesEC2(t)
	s.e.checkAccounts(t)

	// With the pod gone the ENI's last two addresses are surplus, proposed
	// and acknowledged: the release covers the whole ENI, which goes back
	// to EC2 by detach and delete, without a second Unassign.
	rel = s.proposal(t)
	if rel.ENIID != s.eni.ID || !sameSet(rel.Addresses, want) {
		t.Fatalf("second proposal %+v; want %v of %s", rel, want, s.eni.ID)
	}
	if _, err := s.e.st.AckRelease(ctx, s.node, rel.ID, rel.Addresses, nil); err != nil {
		t.Fatalf("ack: %v", err)
	}
	waitFor(t, "the emptied ENI deleted", 20*time.Second, func() (bool, error) {
		_, inEC2 := s.e.sim.World().NetworkInterface(s.eni.ID)
		_, err := s.e.st.GetENI(ctx, s.eni.ID)
		return !inEC2 && err != nil, err
	})
	if err := s.r.stop(t); err != nil {
		t.Fatal(err)
	}
	c = s.e.sim.Counters()
	for action, n := range map[string]int64{"UnassignPrivateIpAddresses": 1, "DetachNetworkInterface": 1, "DeleteNetworkInterface": 1} {
		if c[action].Calls != n {
			t.Errorf("%s: %d calls, want %d", action, c[action].Calls, n)
		}
	}
	if got, _ := s.e.ec2Addresses(s.primary.ID); !sameSet(got, s.primary.Addresses) {
		t.Errorf("primary ENI changed: %v", got)
	}
	s.e.checkAccounts(t)
}

func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}
