package server

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"google.golang.org/grpc/codes"
)

func TestSetDemandRecordsKnown(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	e.register(t, node1, subnet1)
	e.register(t, node2, subnet1)
	known := int32(7)
	if _, err := e.node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: node1, Pending: 3, Known: &known}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: node2, Pending: 2}); err != nil {
		t.Fatal(err)
	}
	neg := int32(-1)
	_, err := e.node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: node2, Pending: 9, Known: &neg})
	wantCode(t, err, codes.InvalidArgument, "known")

	ds, err := e.st.ListDemands(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := ds[node1]; d.Pending != 3 || d.Known != 7 || !d.HasKnown {
		t.Fatalf("demand with known: %+v", d)
	}
	// Without known the broker keeps its own estimate; the refused demand
	// left the earlier one in place.
	if d := ds[node2]; d.Pending != 2 || d.Known != 0 || d.HasKnown {
		t.Fatalf("demand without known: %+v", d)
	}
}

// staleHub is a hub that is not running, with a state set by hand.
func staleHub(t *testing.T, e *env, live bool, states map[string][]store.ENI) *hub {
	h := newHub(e.st, slog.New(slog.DiscardHandler), time.Millisecond, time.Minute)
	for id, enis := range states {
		h.nodes[id] = &nodeState{registered: true, enis: enis, ev: &allotv1.NodeEvent{}, replaced: make(chan struct{})}
	}
	h.rev, h.live = 1, live
	return h
}

func TestReportUsageFallsBackToTheStore(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	e.subnet(t, subnet1, "10.0.1.0/24", 251)
	e.register(t, node1, subnet1)
	e.addENI(t, node1, subnet1, "eni-00000011", 1, []string{"10.0.1.21", "10.0.1.22"})
	report := &allotv1.ReportUsageRequest{InstanceId: node1, Seq: 1, Assigned: []string{"10.0.1.21"}, Free: []string{"10.0.1.22"}}

	// The hub has not yet seen the ENI (the agent learned it from a
	// RegisterResponse read later): etcd is asked before refusing.
	behind := &nodeService{st: e.st, hub: staleHub(t, e, true, map[string][]store.ENI{node1: nil}),
		now: time.Now, log: slog.New(slog.DiscardHandler)}
	if _, err := behind.ReportUsage(ctx, report); err != nil {
		t.Fatalf("report of addresses etcd holds, hub behind: %v", err)
	}
	if u, err := e.st.GetUsage(ctx, node1); err != nil || u.Seq != 1 {
		t.Fatalf("usage %+v, %v", u, err)
	}

	// A hub that lost its watch is not trusted, whatever it lists.
	claimed := []store.ENI{{ID: "eni-00000099", InstanceID: node1, Addresses: []string{"10.0.1.99"}}}
	broken := &nodeService{st: e.st, hub: staleHub(t, e, false, map[string][]store.ENI{node1: claimed}),
		now: time.Now, log: slog.New(slog.DiscardHandler)}
	_, err := broken.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: node1, Seq: 2, Assigned: []string{"10.0.1.99"}})
	if code := rpcerr.Code(err); code != codes.FailedPrecondition {
		t.Fatalf("report checked against a broken hub: %v", err)
	}

	// A live hub's state answers by itself.
	live := &nodeService{st: e.st, hub: staleHub(t, e, true, map[string][]store.ENI{node1: claimed}),
		now: time.Now, log: slog.New(slog.DiscardHandler)}
	if _, err := live.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: node1, Seq: 3, Assigned: []string{"10.0.1.99"}}); err != nil {
		t.Fatalf("report checked against a live hub: %v", err)
	}
}

// waitHub polls until cond holds of the hub's published node states.
func waitHub(t *testing.T, h *hub, what string, cond func(nodes map[string]*nodeState) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h.mu.Lock()
		ok := cond(h.nodes)
		h.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("hub never published %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHubReplacesOnlyTheStateOfChangedNodes(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	h := e.srv.hub
	e.subnet(t, subnet1, "10.0.1.0/24", 251)
	e.register(t, node1, subnet1)
	e.register(t, node2, subnet1)
	e.addENI(t, node2, subnet1, "eni-00000021", 1, []string{"10.0.1.31"})
	waitHub(t, h, "node 2's attached ENI", func(n map[string]*nodeState) bool {
		return n[node2] != nil && len(n[node2].enis) == 1 && n[node2].enis[0].DeviceIndex == 1 && n[node1] != nil
	})
	h.mu.Lock()
	before := h.nodes[node2]
	h.mu.Unlock()

	// An ENI for node 1, node 2's usage report and a budget change (the
	// subnet's counters move with every intent too): node 2's message is
	// the same, so its state is not replaced and its stream not woken.
	if _, err := e.node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: node2, Seq: 1, Free: []string{"10.0.1.31"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.SetSubnetBudget(ctx, subnet1, 10, 0); err != nil {
		t.Fatal(err)
	}
	e.addENI(t, node1, subnet1, "eni-00000011", 1, []string{"10.0.1.21"})
	waitHub(t, h, "node 1's ENI", func(n map[string]*nodeState) bool {
		return n[node1] != nil && len(n[node1].enis) == 1 && n[node1].enis[0].DeviceIndex == 1
	})
	h.mu.Lock()
	after := h.nodes[node2]
	h.mu.Unlock()
	if after != before {
		t.Fatalf("node 2's state was replaced by changes of other records")
	}
	select {
	case <-before.replaced:
		t.Fatal("node 2's stream was woken")
	default:
	}

	// A change of node 2's subnet CIDR reaches node 2's ENI messages.
	if _, err := e.st.PutSubnet(ctx, store.Subnet{ID: subnet1, CIDR: "10.0.0.0/23", Usable: 507}); err != nil {
		t.Fatal(err)
	}
	waitHub(t, h, "the new CIDR", func(n map[string]*nodeState) bool {
		return n[node2].ev.GetEnis()[0].GetSubnetCidr() == "10.0.0.0/23"
	})
	<-before.replaced
}

func TestFirstEventIsNewerThanAForeignWrite(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	e.subnet(t, subnet1, "10.0.1.0/24", 251)
	reg := e.register(t, node1, subnet1)

	// Another cluster's write raises etcd's revision without an event on
	// this cluster's prefix; the stream's first snapshot still claims (and
	// is) at least as new as the revision when it asked.
	other, err := store.Open(e.st.Client(), "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.PutSubnet(ctx, store.Subnet{ID: subnet2, CIDR: "10.0.2.0/24", Usable: 251}); err != nil {
		t.Fatal(err)
	}
	rev, err := e.st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rev <= reg.GetRevision() {
		t.Fatalf("revision %d after the foreign write, %d at registration", rev, reg.GetRevision())
	}
	s, err := e.node.WatchNode(ctx, &allotv1.WatchNodeRequest{InstanceId: node1})
	if err != nil {
		t.Fatal(err)
	}
	if ev := recvEvent(t, s); ev.GetRevision() < rev {
		t.Fatalf("first snapshot at revision %d, the client asked at %d", ev.GetRevision(), rev)
	}
	again, err := e.node.Register(ctx, &allotv1.RegisterRequest{Node: identity(node1, subnet1)})
	if err != nil {
		t.Fatal(err)
	}
	if again.GetRevision() < rev {
		t.Fatalf("registration at revision %d after %d", again.GetRevision(), rev)
	}
}
