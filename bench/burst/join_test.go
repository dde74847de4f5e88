package burst

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/allotnet/allot/awssim"
)

// joinFleet is a fleet whose join fails for the instances it names.
type joinFleet struct {
	fleet
	fail   map[string]bool
	joined []string
}

func (f *joinFleet) join(_ context.Context, insts []awssim.AdminInstance) error {
	je := &JoinError{}
	for _, in := range insts {
		if f.fail[in.ID] {
			je.Failed = append(je.Failed, FailedJoin{Instance: in.ID, Err: errors.New("imds timed out")})
			continue
		}
		f.joined = append(f.joined, in.ID)
	}
	if len(je.Failed) > 0 {
		return je
	}
	return nil
}

func instances(ids ...string) []awssim.AdminInstance {
	out := make([]awssim.AdminInstance, len(ids))
	for i, id := range ids {
		out[i] = awssim.AdminInstance{ID: id}
	}
	return out
}

// TestJoinSomeLeavesOutAFewNodes: a node that did not join is noted and
// the run goes on, until more than one in a hundred did not.
func TestJoinSomeLeavesOutAFewNodes(t *testing.T) {
	f := &joinFleet{fail: map[string]bool{"i-2": true, "i-5": true}}
	dropped := map[string]error{}
	if err := joinSome(context.Background(), f, instances("i-1", "i-2", "i-3"), dropped, 200); err != nil {
		t.Fatalf("one of 200 nodes failing: %v, want the run to go on", err)
	}
	if len(dropped) != 1 || dropped["i-2"] == nil {
		t.Fatalf("dropped %v, want i-2", dropped)
	}
	if err := joinSome(context.Background(), f, instances("i-4", "i-5"), dropped, 200); err != nil {
		t.Fatalf("two of 200 nodes failing: %v, want the run to go on", err)
	}
	err := joinSome(context.Background(), f, instances("i-2"), map[string]error{"i-5": errors.New("x"), "i-6": errors.New("y")}, 200)
	var je *JoinError
	if !errors.As(err, &je) || !strings.Contains(err.Error(), "3 of 200 nodes did not join") {
		t.Fatalf("three of 200 failing: %v, want the run's failure", err)
	}
	plain := errors.New("broker gone")
	if err := joinSome(context.Background(), errFleet{plain}, instances("i-7"), map[string]error{}, 200); !errors.Is(err, plain) {
		t.Fatalf("a join error that names no node: %v, want it returned", err)
	}

	insts, early := withoutDropped(instances("i-1", "i-2", "i-3", "i-4", "i-5", "i-6"), 5, dropped)
	var ids []string
	for _, in := range insts {
		ids = append(ids, in.ID)
	}
	if got := strings.Join(ids, ","); got != "i-1,i-3,i-4,i-6" || early != 3 {
		t.Fatalf("without the dropped: %s, %d early; want i-1,i-3,i-4,i-6 and 3", got, early)
	}
	p := droppedProblems(dropped)
	if len(p) != 2 || !strings.Contains(p[0], "i-2") || !strings.Contains(p[0], "imds timed out") {
		t.Fatalf("problems %q", p)
	}
}

type errFleet struct {
	err error
}

func (f errFleet) join(context.Context, []awssim.AdminInstance) error { return f.err }
func (errFleet) warmMissing() int                                     { return 0 }
func (errFleet) describeMissing() string                              { return "" }
func (errFleet) backends() []cni                                      { return nil }
func (errFleet) stop()                                                {}
