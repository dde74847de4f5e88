package store

import (
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"testing"
)

func TestNodeStatusWritesOnlyOnChange(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	err := s.PutNodeStatus(ctx, NodeStatus{InstanceID: "i-1", Reason: UnmetBudget, Message: "x"})
	wantErr(t, err, rpcerr.ErrNotFound) // not registered
	mustNode(t, s, "i-1")

	st := NodeStatus{InstanceID: "i-1", Reason: UnmetBudget, Message: "subnet subnet-1: budget exceeded: limit 0, in use 0, requested 3"}
	if err := s.PutNodeStatus(ctx, st); err != nil {
		t.Fatal(err)
	}
	first, err := s.GetNodeStatus(ctx, "i-1")
	if err != nil {
		t.Fatal(err)
	}
	if first.Reason != UnmetBudget || first.Message != st.Message || first.Since.IsZero() {
		t.Fatalf("stored %+v", first)
	}
	before := s.Writes()["PutNodeStatus"]
	if err := s.PutNodeStatus(ctx, st); err != nil {
		t.Fatal(err)
	}
	if got := s.Writes()["PutNodeStatus"]; got != before {
		t.Fatalf("an unchanged status cost %d writes", got-before)
	}
	again, _ := s.GetNodeStatus(ctx, "i-1")
	if again.Rev != first.Rev {
		t.Fatalf("unchanged status rewritten: rev %d -> %d", first.Rev, again.Rev)
	}

	// Same reason, new figures: rewritten, Since kept.
	st.Message = "subnet subnet-1: budget exceeded: limit 0, in use 0, requested 5"
	if err := s.PutNodeStatus(ctx, st); err != nil {
		t.Fatal(err)
	}
	upd, _ := s.GetNodeStatus(ctx, "i-1")
	if upd.Message != st.Message || !upd.Since.Equal(first.Since) {
		t.Fatalf("updated %+v, want new message and Since %v", upd, first.Since)
	}

	all, err := s.ListNodeStatus(ctx)
	if err != nil || len(all) != 1 || all["i-1"].Reason != UnmetBudget {
		t.Fatalf("ListNodeStatus = %v, %v", all, err)
	}
	if err := s.ClearNodeStatus(ctx, "i-1"); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetNodeStatus(ctx, "i-1")
	wantErr(t, err, rpcerr.ErrNotFound)
	before = s.Writes()["ClearNodeStatus"]
	if err := s.ClearNodeStatus(ctx, "i-1"); err != nil {
		t.Fatal(err)
	}
	if s.Writes()["ClearNodeStatus"] != before {
		t.Fatal("clearing an absent status wrote")
	}

	// DeleteNode takes the status with it.
	if err := s.PutNodeStatus(ctx, NodeStatus{InstanceID: "i-1", Reason: UnmetNodeFull, Message: "full"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteNode(ctx, "i-1"); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetNodeStatus(ctx, "i-1")
	wantErr(t, err, rpcerr.ErrNotFound)
}
