package executor_test

import (
	"testing"
	"time"

	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
)

// TestReleaseSurplusKeepsItsAge: a node with more surplus than one ENI
// holds waits ReleaseAfter once; the release after one that took something
// is proposed without a second wait. A proposal withdrawn unanswered
// restarts the wait.
func TestReleaseSurplusKeepsItsAge(t *testing.T) {
	const after, timeout = 8 * time.Second, 3 * time.Second
	s := newReleaseSetup(t, executor.Config{ReleaseAfter: after, ReleaseTimeout: timeout})
	ctx := ctxT(t)
	// 13 free: the second ENI's 6 and 7 of the primary; 11 excess.
	s.report(t, 1, s.primary.Addresses[:2])
	first := s.proposal(t)
	if first.ENIID != s.eni.ID {
		t.Fatalf("first proposal %+v; want the ENI without pods, %s", first, s.eni.ID)
	}
	if _, err := s.e.st.AckRelease(ctx, s.node, first.ID, first.Addresses, nil); err != nil {
		t.Fatalf("ack: %v", err)
	}
	second := s.proposal(t)
	if second.ENIID != s.primary.ID {
		t.Fatalf("second proposal %+v; want the primary's surplus", second)
	}
	if d := second.CreatedAt.Sub(first.CreatedAt); d >= after {
		t.Errorf("second proposal %s after the first; want it without another wait of %s", d, after)
	}
	// Unanswered, the second is withdrawn; the third waits afresh.
	third := s.proposal(t)
	for third.ID == second.ID {
		time.Sleep(100 * time.Millisecond)
		third = s.proposal(t)
	}
	if d := third.CreatedAt.Sub(second.CreatedAt); d < timeout+after {
		t.Errorf("third proposal %s after the withdrawn second; want at least its timeout and a new wait, %s", d, timeout+after)
	}
	if st := s.r.eng.Stats(); st.Cancelled == 0 {
		t.Errorf("no proposal was withdrawn: %+v", st)
	}
	rels, _ := s.e.st.ListReleases(ctx, s.node)
	for _, r := range rels {
		if r.ID == first.ID && r.State != store.ReleaseDone {
			t.Errorf("first release is %s, want done", r.State)
		}
	}
}
