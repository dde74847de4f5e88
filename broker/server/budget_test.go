package server

import (
	"context"
	"testing"

	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"google.golang.org/grpc/codes"
)

// prepare builds a known state: subnet1 (/24, 251 usable) with node1
// (m5.large: 3 ENIs of 10) holding one secondary ENI of 9 addresses, 5 of
// them assigned to pods and 4 warm, and an intent in flight reserving 3;
// subnet2 (/26, 59 usable) empty.
func prepare(t *testing.T, e *env) {
	t.Helper()
	ctx := ctxT(t)
	e.subnet(t, subnet1, "10.0.1.0/24", 251)
	e.subnet(t, subnet2, "10.0.2.0/26", 59)
	e.register(t, node1, subnet1)
	e.limits(t, node1, 3, 10)
	e.addENI(t, node1, subnet1, "eni-00000011", 1, addrs("10.0.1", 21, 9))
	if _, err := e.node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: node1, Seq: 1,
		Assigned: addrs("10.0.1", 21, 5), Free: addrs("10.0.1", 26, 4)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.BeginIntent(ctx, store.Intent{Kind: store.IntentAssign, InstanceID: node1, ENIID: "eni-00000011",
		SubnetID: subnet1, Count: 3, Reserved: 3}); err != nil {
		t.Fatal(err)
	}
}

func TestBudgetFiguresForPreparedState(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	prepare(t, e)

	b, err := e.budget.GetSubnetBudget(ctx, &allotv1.GetSubnetBudgetRequest{SubnetId: subnet1})
	if err != nil {
		t.Fatal(err)
	}
	// attached 10 (ENI primary + 9), reserved 3, available 251-13 = 238:
	// the ENI is full, so 23 new ENIs (207 pods) and 8 left (7 pods), plus
	// 4 warm.
	got := [8]int64{b.Usable, b.Limit, b.Attached, b.Assigned, b.Warm, b.Reserved, b.Available, b.HeadroomPods}
	want := [8]int64{251, 251, 10, 5, 4, 3, 238, 4 + 207 + 7}
	if got != want {
		t.Fatalf("usable, limit, attached, assigned, warm, reserved, available, headroom_pods\n got %v\nwant %v", got, want)
	}
	if b.Cidr != "10.0.1.0/24" || b.AvailabilityZone != "us-east-1a" || b.Revision == 0 {
		t.Fatalf("budget %v", b)
	}

	list, err := e.budget.ListSubnetBudgets(ctx, &allotv1.ListSubnetBudgetsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Budgets) != 2 || list.Budgets[0].SubnetId != subnet1 || list.Budgets[1].SubnetId != subnet2 ||
		list.Budgets[1].Available != 59 || list.Budgets[1].HeadroomPods != 59 {
		t.Fatalf("list %v", list)
	}

	// A cap below what is in use leaves nothing available.
	b, err = e.budget.SetSubnetBudget(ctx, &allotv1.SetSubnetBudgetRequest{SubnetId: subnet1, Headroom: 20, Cap: 12})
	if err != nil {
		t.Fatal(err)
	}
	if b.Headroom != 20 || b.Cap != 12 || b.Limit != 12 || b.Available != 0 || b.HeadroomPods != 4 {
		t.Fatalf("after set: %v", b)
	}
	b, err = e.budget.SetSubnetBudget(ctx, &allotv1.SetSubnetBudgetRequest{SubnetId: subnet1, Headroom: 20})
	if err != nil {
		t.Fatal(err)
	}
	if b.Limit != 231 || b.Available != 218 {
		t.Fatalf("after removing the cap: %v", b)
	}

	_, err = e.budget.GetSubnetBudget(ctx, &allotv1.GetSubnetBudgetRequest{SubnetId: "subnet-0000000c"})
	wantCode(t, err, codes.NotFound, "subnet-0000000c")
	_, err = e.budget.SetSubnetBudget(ctx, &allotv1.SetSubnetBudgetRequest{SubnetId: "subnet-0000000c", Cap: 5})
	wantCode(t, err, codes.NotFound, "subnet-0000000c")
}

func TestWatchSubnetBudgets(t *testing.T) {
	e := newEnv(t)
	prepare(t, e)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	s, err := e.budget.WatchSubnetBudgets(ctx, &allotv1.WatchSubnetBudgetsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	recv := func() *allotv1.SubnetBudget {
		t.Helper()
		b, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if a, b := recv(), recv(); a.SubnetId != subnet1 || b.SubnetId != subnet2 || a.Assigned != 5 {
		t.Fatalf("initial list %v, %v", a, b)
	}

	// A pod takes a warm address: only subnet1 is sent again.
	if _, err := e.node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: node1, Seq: 2,
		Assigned: addrs("10.0.1", 21, 6), Free: addrs("10.0.1", 27, 3)}); err != nil {
		t.Fatal(err)
	}
	b := recv()
	if b.SubnetId != subnet1 || b.Assigned != 6 || b.Warm != 3 {
		t.Fatalf("after usage report: %v", b)
	}
	// Then a budget change of subnet2 sends subnet2, and nothing of subnet1
	// came in between.
	if _, err := e.budget.SetSubnetBudget(ctx, &allotv1.SetSubnetBudgetRequest{SubnetId: subnet2, Cap: 30}); err != nil {
		t.Fatal(err)
	}
	b = recv()
	if b.SubnetId != subnet2 || b.Cap != 30 || b.Available != 30 {
		t.Fatalf("after budget change: %v", b)
	}
}
