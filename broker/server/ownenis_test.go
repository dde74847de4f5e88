package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// fullReads counts the reads of every ENI record.
type fullReads struct {
	*store.Store
	n atomic.Int32
}

func (f *fullReads) ListNodeENIs(ctx context.Context, id string) ([]store.ENI, error) {
	f.n.Add(1)
	return f.Store.ListNodeENIs(ctx, id)
}

func (f *fullReads) ListENIs(ctx context.Context) ([]store.ENI, error) {
	f.n.Add(1)
	return f.Store.ListENIs(ctx)
}

// TestOwnershipCheckFromAStaleHub: when the hub's published state of a
// node lacks an address the node reports (the ENI is newer than the
// hub), the check reads the node's ENIs from what the hub knew and what
// was written since, not every ENI of the cluster, and still refuses an
// address of another node.
func TestOwnershipCheckFromAStaleHub(t *testing.T) {
	st, err := store.Open(etcdembedtest.Start(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if _, err := st.PutSubnet(ctx, store.Subnet{ID: "subnet-1", CIDR: "10.0.0.0/24", Usable: 251}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{node1, node2} {
		if _, err := st.PutNode(ctx, store.Node{InstanceID: id, InstanceType: "m5.large", SubnetID: "subnet-1"}); err != nil {
			t.Fatal(err)
		}
	}
	primary := store.ENI{ID: "eni-p1", InstanceID: node1, SubnetID: "subnet-1", PrimaryIP: "10.0.0.1"}
	if err := st.PutPrimaryENI(ctx, primary); err != nil {
		t.Fatal(err)
	}
	known, err := st.ListNodeENIs(ctx, node1)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The hub is live but stopped at rev: it never hears of what follows.
	h := newHub(st, slog.New(slog.DiscardHandler), 0, 0)
	h.nodes[node1] = &nodeState{registered: true, enis: known}
	h.rev, h.live = rev, true
	for _, x := range []struct{ eni, node, addr string }{{"eni-a", node1, "10.0.0.11"}, {"eni-b", node2, "10.0.0.21"}} {
		in, err := st.BeginIntent(ctx, store.Intent{Kind: store.IntentCreate, InstanceID: x.node, SubnetID: "subnet-1", Reserved: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.CompleteCreate(ctx, in.ID, store.ENI{ID: x.eni, PrimaryIP: "10.0.0.2" + x.eni[4:], Addresses: []string{x.addr}}); err != nil {
			t.Fatal(err)
		}
	}
	fr := &fullReads{Store: st}
	svc := &nodeService{st: fr, hub: h, log: slog.New(slog.DiscardHandler)}
	if err := svc.checkOwned(ctx, node1, []string{"10.0.0.11"}); err != nil {
		t.Fatalf("an address on the node's newer ENI: %v", err)
	}
	if n := fr.n.Load(); n != 0 {
		t.Errorf("%d reads of every ENI; want none", n)
	}
	if err := svc.checkOwned(ctx, node1, []string{"10.0.0.21"}); !errors.Is(err, rpcerr.ErrNotOwner) {
		t.Errorf("another node's address: %v; want ErrNotOwner", err)
	}
}

// slowSince counts the reads of a node's ENIs from etcd in flight at once,
// each taking a while, as under a loaded etcd.
type slowSince struct {
	*store.Store
	mu            sync.Mutex
	inFlight, max int
}

func (s *slowSince) NodeENIsSince(ctx context.Context, id string, known []store.ENI, since int64) ([]store.ENI, int64, error) {
	s.mu.Lock()
	s.inFlight++
	s.max = max(s.max, s.inFlight)
	s.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	return s.Store.NodeENIsSince(ctx, id, known, since)
}

// TestStaleHubReadsBounded: when the hub is behind for many nodes at once
// (etcd slow under a joining fleet), their usage checks read their ENIs
// from etcd at most readSlots at a time, since each read makes etcd scan
// every ENI record; every check still gets its answer.
func TestStaleHubReadsBounded(t *testing.T) {
	st, err := store.Open(etcdembedtest.Start(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if _, err := st.PutSubnet(ctx, store.Subnet{ID: "subnet-1", CIDR: "10.0.0.0/24", Usable: 251}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutNode(ctx, store.Node{InstanceID: node1, InstanceType: "m5.large", SubnetID: "subnet-1"}); err != nil {
		t.Fatal(err)
	}
	rev, err := st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := newHub(st, slog.New(slog.DiscardHandler), 0, 0)
	h.nodes[node1] = &nodeState{registered: true}
	h.rev, h.live = rev, true // the hub never hears of the ENI below
	in, err := st.BeginIntent(ctx, store.Intent{Kind: store.IntentCreate, InstanceID: node1, SubnetID: "subnet-1", Reserved: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CompleteCreate(ctx, in.ID, store.ENI{ID: "eni-a", PrimaryIP: "10.0.0.10", Addresses: []string{"10.0.0.11"}}); err != nil {
		t.Fatal(err)
	}
	ss := &slowSince{Store: st}
	svc := &nodeService{st: ss, hub: h, log: slog.New(slog.DiscardHandler)}
	const checks = 12
	errs := make(chan error, checks)
	for range checks {
		go func() { errs <- svc.checkOwned(ctx, node1, []string{"10.0.0.11"}) }()
	}
	for range checks {
		if err := <-errs; err != nil {
			t.Errorf("check: %v", err)
		}
	}
	if ss.max > readSlots {
		t.Errorf("%d reads of the node's ENIs from etcd at once, want at most %d", ss.max, readSlots)
	}
}

// TestRegisterReadsWhenTheHubCannotCatchUp: a hub that has lost etcd's
// watch will not publish the node, so Register's read of its ENIs waits
// for a slot to read etcd rather than for the hub, and answers once one is
// free.
func TestRegisterReadsWhenTheHubCannotCatchUp(t *testing.T) {
	st, err := store.Open(etcdembedtest.Start(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if _, err := st.PutSubnet(ctx, store.Subnet{ID: "subnet-1", CIDR: "10.0.0.0/24", Usable: 251}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutNode(ctx, store.Node{InstanceID: node1, InstanceType: "m5.large", SubnetID: "subnet-1"}); err != nil {
		t.Fatal(err)
	}
	primary := store.ENI{ID: "eni-p1", InstanceID: node1, SubnetID: "subnet-1", PrimaryIP: "10.0.0.1"}
	if err := st.PutPrimaryENI(ctx, primary); err != nil {
		t.Fatal(err)
	}
	rev, err := st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := newHub(st, slog.New(slog.DiscardHandler), 0, 0)
	h.rev, h.live = rev, false // the watch broke at rev: the hub answers at once, never live
	svc := &nodeService{st: st, hub: h, log: slog.New(slog.DiscardHandler)}
	var held []func()
	for range readSlots {
		release, err := svc.reads.acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, release)
	}
	type answer struct {
		n   int
		err error
	}
	got := make(chan answer, 1)
	go func() {
		enis, _, err := svc.nodeENIs(ctx, node1, rev)
		got <- answer{len(enis), err}
	}()
	select {
	case a := <-got:
		t.Fatalf("answered %+v while every read slot was taken", a)
	case <-time.After(2 * registerPatience):
	}
	for _, release := range held {
		release()
	}
	if a := <-got; a.err != nil || a.n != 1 {
		t.Fatalf("after a slot was freed: %d ENIs, %v; want the primary", a.n, a.err)
	}
}
