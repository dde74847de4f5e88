package server

import (
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// The gate admits one call of each kind per node, and at most max calls
// that reach etcd over every node; Heartbeat counts against its node alone
// and Register against the total alone; other services pass.
func TestCallGate(t *testing.T) {
	g := newCallGate(2, slog.New(slog.DiscardHandler), time.Now)
	const (
		demand   = allotv1.NodeService_SetDemand_FullMethodName
		usage    = allotv1.NodeService_ReportUsage_FullMethodName
		beat     = allotv1.NodeService_Heartbeat_FullMethodName
		register = allotv1.NodeService_Register_FullMethodName
		budget   = allotv1.BudgetService_GetCapacity_FullMethodName
	)
	enter := func(node, method string) func() {
		t.Helper()
		release, err := g.enter(node, method)
		if err != nil {
			t.Fatalf("%s of %s refused: %v", shortMethod(method), node, err)
		}
		return release
	}
	refused := func(node, method, fragment string) {
		t.Helper()
		_, err := g.enter(node, method)
		wantCode(t, err, codes.Unavailable, "broker busy", fragment)
	}

	d1 := enter(node1, demand)
	refused(node1, demand, "an earlier SetDemand call of node "+node1)
	b1 := enter(node1, beat)
	refused(node1, beat, "Heartbeat")
	u2 := enter(node2, usage)
	refused(node2, demand, "2 agent calls in progress") // the total
	b2 := enter(node2, beat)                            // Heartbeat: not counted
	refused(node2, register, "2 agent calls in progress")
	enter("", budget)()
	for range 3 {
		enter(node1, budget)()
	}

	d1()
	r2 := enter(node2, register)
	r2b, err := g.enter(node2, register) // at the total again
	if err == nil {
		r2b()
		t.Fatal("a third call counted against a total of 2 was admitted")
	}
	r2()
	r2c := enter(node2, register) // Register: not one per node
	r2c()
	b1()
	enter(node1, beat)()
	u2()
	b2()
	if g.inFlight != 0 || len(g.byNode) != 0 {
		t.Fatalf("after every release: %d in flight, %d node calls held", g.inFlight, len(g.byNode))
	}
	if n := g.Refused(); n != 5 {
		t.Fatalf("%d refusals counted, want 5", n)
	}
}

// Over gRPC, a refused call reaches the agent as codes.Unavailable saying
// the broker is busy, and the calls the gate holds no place for pass.
func TestBusyRefusedOverGRPC(t *testing.T) {
	st, err := store.Open(etcdembedtest.Start(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	logged := &records{}
	srv, err := New(Config{Store: st, Logger: slog.New(logged), MaxAgentCalls: 1,
		Coalesce: 5 * time.Millisecond, HealthInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(serveLocal(t, srv), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	e := &env{st: st, srv: srv, conn: conn, node: allotv1.NewNodeServiceClient(conn)}
	e.register(t, node1, subnet1)
	ctx := ctxT(t)

	// A SetDemand of node1 still held up in the broker (its agent gave up).
	held, err := srv.gate.enter(node1, allotv1.NodeService_SetDemand_FullMethodName)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: node1, Pending: 1})
	wantCode(t, err, codes.Unavailable, "broker busy", "SetDemand", node1)
	_, err = e.node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: node1, Seq: 1})
	wantCode(t, err, codes.Unavailable, "broker busy", "1 agent calls in progress")
	if _, err := e.node.Heartbeat(ctx, &allotv1.HeartbeatRequest{InstanceId: node1}); err != nil {
		t.Fatalf("heartbeat while the gate is full: %v", err)
	}
	held()
	if _, err := e.node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: node1, Pending: 1}); err != nil {
		t.Fatalf("SetDemand once the earlier one ended: %v", err)
	}
	if n := srv.RefusedCalls(); n != 2 {
		t.Fatalf("RefusedCalls %d, want 2", n)
	}
	// Refusals are summed up, not logged one by one: the first since the
	// start at once, the next within 10 s in the next summary (two if the
	// machine stalled 10 s between them).
	logged.mu.Lock()
	var summaries, callRecords int
	for _, r := range logged.list {
		switch r.Message {
		case "agent calls refused while the broker is busy; agents retry with backoff":
			summaries++
		case "finished call":
			callRecords++
		}
	}
	logged.mu.Unlock()
	if summaries < 1 || summaries > 2 || callRecords != 0 {
		t.Fatalf("%d summaries and %d call records logged at Info or above for 2 refusals, want 1 and 0", summaries, callRecords)
	}
	// A refused call's place is not kept: nothing is left held.
	if srv.gate.inFlight != 0 || len(srv.gate.byNode) != 0 {
		t.Fatalf("%d in flight, %d node calls held after every call ended", srv.gate.inFlight, len(srv.gate.byNode))
	}
}
