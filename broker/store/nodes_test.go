package store

import (
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"math"
	"slices"
	"testing"
	"time"
)

func TestNodeRegisterIdempotent(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	first, err := s.PutNode(ctx, Node{InstanceID: "i-2", InstanceType: "m5.large", MaxENIs: 3})
	if err != nil {
		t.Fatal(err)
	}
	if first.RegisteredAt.IsZero() || first.Rev == 0 {
		t.Fatalf("PutNode = %+v, want RegisteredAt and Rev set", first)
	}
	again, err := s.PutNode(ctx, Node{InstanceID: "i-2", InstanceType: "m5.large", MaxENIs: 2, RegisteredAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if !again.RegisteredAt.Equal(first.RegisteredAt) || again.MaxENIs != 2 {
		t.Fatalf("re-register = %+v: want first RegisteredAt kept, MaxENIs updated", again)
	}
	mustNode(t, s, "i-1")
	got, err := s.GetNode(ctx, "i-2")
	if err != nil || got.MaxENIs != 2 || !got.RegisteredAt.Equal(first.RegisteredAt) {
		t.Fatalf("GetNode = %+v, %v", got, err)
	}
	nodes, err := s.ListNodes(ctx)
	if err != nil || len(nodes) != 2 || nodes[0].InstanceID != "i-1" || nodes[1].InstanceID != "i-2" {
		t.Fatalf("ListNodes = %+v, %v; want i-1, i-2", nodes, err)
	}
	_, err = s.PutNode(ctx, Node{InstanceID: "i-3", MaxENIs: -1})
	wantErr(t, err, rpcerr.ErrInvalid)
	_, err = s.GetNode(ctx, "i-9")
	wantErr(t, err, rpcerr.ErrNotFound)
}

func TestDemandAndDeleteNode(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	wantErr(t, s.PutDemand(ctx, Demand{InstanceID: "i-1", Pending: 1}), rpcerr.ErrNotFound)
	mustNode(t, s, "i-1")
	mustNode(t, s, "i-2")
	wantErr(t, s.PutDemand(ctx, Demand{InstanceID: "i-1", Pending: -1}), rpcerr.ErrInvalid)
	if err := s.PutDemand(ctx, Demand{InstanceID: "i-1", Pending: 3, WarmShortfall: 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutDemand(ctx, Demand{InstanceID: "i-1", Pending: 5}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutDemand(ctx, Demand{InstanceID: "i-2", WarmShortfall: 7}); err != nil {
		t.Fatal(err)
	}
	ds, err := s.ListDemands(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds["i-1"].Pending != 5 || ds["i-1"].WarmShortfall != 0 || ds["i-2"].WarmShortfall != 7 || ds["i-1"].UpdatedAt.IsZero() {
		t.Fatalf("ListDemands = %+v", ds)
	}
	if err := s.KeepAlive(ctx, "i-1", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteNode(ctx, "i-1"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.DeleteNode(ctx, "i-1"), rpcerr.ErrNotFound)
	_, err = s.GetNode(ctx, "i-1")
	wantErr(t, err, rpcerr.ErrNotFound)
	ds, err = s.ListDemands(ctx)
	if err != nil || len(ds) != 1 || ds["i-2"].WarmShortfall != 7 {
		t.Fatalf("after delete ListDemands = %+v, %v; want only i-2", ds, err)
	}
	alive, err := s.Alive(ctx)
	if err != nil || alive["i-1"] {
		t.Fatalf("after delete Alive = %v, %v; want i-1 gone", alive, err)
	}
	// A deleted node's heartbeat does not bring its alive key back.
	wantErr(t, s.KeepAlive(ctx, "i-1", 30*time.Second), rpcerr.ErrNotFound)
}

func TestUsageSeqOrdering(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	_, err := s.PutUsage(ctx, Usage{InstanceID: "i-1", Seq: 1})
	wantErr(t, err, rpcerr.ErrNotFound)
	mustNode(t, s, "i-1")
	steps := []struct {
		seq     uint64
		applied bool
	}{{2, true}, {1, false}, {2, false}, {3, true}, {0, false}}
	for _, st := range steps {
		applied, err := s.PutUsage(ctx, Usage{InstanceID: "i-1", Seq: st.seq, Assigned: []string{"10.0.0.9"}})
		if err != nil {
			t.Fatal(err)
		}
		if applied != st.applied {
			t.Errorf("seq %d: applied %v, want %v", st.seq, applied, st.applied)
		}
	}
	u, err := s.GetUsage(ctx, "i-1")
	if err != nil || u.Seq != 3 {
		t.Fatalf("GetUsage = %+v, %v; want seq 3", u, err)
	}
	_, err = s.PutUsage(ctx, Usage{InstanceID: "i-1", Seq: 9, Assigned: []string{"nope"}})
	wantErr(t, err, rpcerr.ErrInvalid)
	_, err = s.PutUsage(ctx, Usage{InstanceID: "i-1", Seq: 9, Assigned: []string{"10.0.0.1"}, Free: []string{"10.0.0.1"}})
	wantErr(t, err, rpcerr.ErrInvalid)
	_, err = s.PutUsage(ctx, Usage{InstanceID: "i-1", Seq: 9, Free: []string{"10.0.0.1"}, Excess: 2, HasExcess: true})
	wantErr(t, err, rpcerr.ErrInvalid)
	us, err := s.ListUsage(ctx)
	if err != nil || len(us) != 1 || us["i-1"].Seq != 3 {
		t.Fatalf("ListUsage = %+v, %v", us, err)
	}
	_, err = s.GetUsage(ctx, "i-2")
	wantErr(t, err, rpcerr.ErrNotFound)
}

func TestKeepAliveLease(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	wantErr(t, s.KeepAlive(ctx, "i-1", time.Second), rpcerr.ErrNotFound)
	mustNode(t, s, "i-1")
	mustNode(t, s, "i-2")
	wantErr(t, s.KeepAlive(ctx, "i-1", 10*time.Millisecond), rpcerr.ErrInvalid)
	if err := s.KeepAlive(ctx, "i-1", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.KeepAlive(ctx, "i-2", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.KeepAlive(ctx, "i-2", time.Minute); err != nil {
		t.Fatal(err)
	}
	if w := s.Writes(); w["KeepAliveGrant"] != 2 || w["KeepAlive"] != 2 || w["KeepAliveRenew"] != 0 {
		t.Errorf("Writes = %v: want a lease per TTL, a key per node, and nothing for the second keepalive of i-2", w)
	}
	alive, err := s.Alive(ctx)
	if err != nil || !alive["i-1"] || !alive["i-2"] {
		t.Fatalf("Alive = %v, %v", alive, err)
	}
	// Without renewal i-1's lease expires; etcd may stretch a short TTL, so
	// allow generously.
	deadline := time.Now().Add(20 * time.Second)
	for {
		alive, err = s.Alive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !alive["i-1"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("i-1 still alive 20s after its 1s lease")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !alive["i-2"] {
		t.Fatal("i-2 expired with a one-minute lease")
	}
	// After expiry a heartbeat grants a new lease and the node is back.
	if err := s.KeepAlive(ctx, "i-1", time.Second); err != nil {
		t.Fatal(err)
	}
	if alive, _ = s.Alive(ctx); !alive["i-1"] {
		t.Fatal("i-1 not alive after keepalive following expiry")
	}
}

// TestUsageSeqCannotBePoisoned: a report whose seq jumps past what an agent
// could have sent since the last one is refused and changes nothing, so a
// report with seq 2^64-1 cannot hide every later one; deleting the node
// removes its usage, so an instance that comes back starts afresh.
func TestUsageSeqCannotBePoisoned(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	mustNode(t, s, "i-1")
	now := time.Now().UTC()
	if _, err := s.PutUsage(ctx, Usage{InstanceID: "i-1", Seq: 3, Assigned: []string{"10.0.0.9"}, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	_, err := s.PutUsage(ctx, Usage{InstanceID: "i-1", Seq: math.MaxUint64, Free: []string{"10.0.0.9"}, UpdatedAt: now.Add(time.Second)})
	wantErr(t, err, rpcerr.ErrInvalid)
	if applied, err := s.PutUsage(ctx, Usage{InstanceID: "i-1", Seq: 4, Assigned: []string{"10.0.0.9"}, UpdatedAt: now.Add(2 * time.Second)}); err != nil || !applied {
		t.Fatalf("the next honest report: applied %v, %v", applied, err)
	}
	// A day of reports later, a long jump is honest.
	if applied, err := s.PutUsage(ctx, Usage{InstanceID: "i-1", Seq: 4 + 86400, UpdatedAt: now.Add(24 * time.Hour)}); err != nil || !applied {
		t.Fatalf("a day later: applied %v, %v", applied, err)
	}
	if err := s.DeleteNode(ctx, "i-1"); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetUsage(ctx, "i-1")
	wantErr(t, err, rpcerr.ErrNotFound)
	mustNode(t, s, "i-1")
	if applied, err := s.PutUsage(ctx, Usage{InstanceID: "i-1", Seq: 1}); err != nil || !applied {
		t.Fatalf("after re-registration, seq 1: applied %v, %v", applied, err)
	}
}

// A node record written before nodes had a Kubernetes name still decodes,
// with none; a name given at registration is kept.
func TestNodeNameOptional(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	old := `{"v":1,"instance_id":"i-7","instance_type":"m5.large","az":"us-east-1a","vpc_id":"vpc-1","subnet_id":"subnet-1",` +
		`"primary_eni_id":"eni-1","primary_ip":"10.0.0.7","security_groups":["sg-1"],"mode":"secondary-ip","max_enis":3,` +
		`"ipv4_per_eni":10,"warm_ip_target":0,"minimum_ip_target":0,"warm_eni_target":1,"warm_prefix_target":0,` +
		`"registered_at":"2026-11-01T10:00:00Z"}`
	if _, err := s.cli.Put(ctx, s.key(kindNodes, "i-7"), old); err != nil {
		t.Fatal(err)
	}
	n, err := s.GetNode(ctx, "i-7")
	if err != nil || n.NodeName != "" || n.InstanceType != "m5.large" || n.MaxENIs != 3 {
		t.Fatalf("old record: %+v, %v", n, err)
	}
	n.NodeName = "ip-10-0-0-7.ec2.internal"
	if _, err := s.PutNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if n, err = s.GetNode(ctx, "i-7"); err != nil || n.NodeName != "ip-10-0-0-7.ec2.internal" {
		t.Fatalf("after registering with a name: %+v, %v", n, err)
	}
}

// Several nodes' demands go in one transaction; each is refused or written
// on its own, and of two of one node the later wins.
func TestPutDemandsTogether(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	mustNode(t, s, "i-1")
	mustNode(t, s, "i-2")
	errs, err := s.PutDemands(ctx, []Demand{
		{InstanceID: "i-1", Pending: 3},
		{InstanceID: "i-9", Pending: 1},  // not registered
		{InstanceID: "i-2", Pending: -1}, // not valid
		{InstanceID: "i-2", WarmShortfall: 7},
		{InstanceID: "i-1", Pending: 5}, // over the first
	})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[3] != nil || errs[4] != nil {
		t.Errorf("errs %v: want the valid demands of registered nodes written", errs)
	}
	wantErr(t, errs[1], rpcerr.ErrNotFound)
	wantErr(t, errs[2], rpcerr.ErrInvalid)
	ds, err := s.ListDemands(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds["i-1"].Pending != 5 || ds["i-2"].WarmShortfall != 7 {
		t.Errorf("demands %+v: want i-1 pending 5, i-2 warm shortfall 7", ds)
	}
	// More than one transaction holds.
	many := make([]Demand, MaxDemands+3)
	for i := range many {
		many[i] = Demand{InstanceID: "i-2", Pending: i}
	}
	if errs, err := s.PutDemands(ctx, many); err != nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		t.Fatalf("PutDemands of %d: %v %v", len(many), errs, err)
	}
	if ds, _ := s.ListDemands(ctx); ds["i-2"].Pending != MaxDemands+2 {
		t.Errorf("i-2 pending %d, want the last, %d", ds["i-2"].Pending, MaxDemands+2)
	}
}
