package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

func TestInvalidRequestsAreInvalidArgument(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	badNode := func(f func(n *allotv1.NodeIdentity)) *allotv1.RegisterRequest {
		n := identity(node1, subnet1)
		f(n)
		return &allotv1.RegisterRequest{Node: n}
	}
	for _, tc := range []struct {
		name      string
		call      func() error
		fragments []string
	}{
		{"register without node", func() error {
			_, err := e.node.Register(ctx, &allotv1.RegisterRequest{})
			return err
		}, []string{"node: required"}},
		{"register with a pod name as instance", func() error {
			_, err := e.node.Register(ctx, badNode(func(n *allotv1.NodeIdentity) { n.InstanceId = "web-0" }))
			return err
		}, []string{"node.instance_id", `"web-0"`, "i-"}},
		{"register with a bad primary ip", func() error {
			_, err := e.node.Register(ctx, badNode(func(n *allotv1.NodeIdentity) { n.PrimaryIp = "10.0.1" }))
			return err
		}, []string{"node.primary_ip", "IPv4"}},
		{"register with a bad subnet", func() error {
			_, err := e.node.Register(ctx, badNode(func(n *allotv1.NodeIdentity) { n.SubnetId = "subnet-XYZ" }))
			return err
		}, []string{"node.subnet_id", "subnet-"}},
		{"register with negative warm target", func() error {
			_, err := e.node.Register(ctx, &allotv1.RegisterRequest{Node: identity(node1, subnet1),
				Warm: &allotv1.WarmTargets{WarmIpTarget: -1}})
			return err
		}, []string{"warm.warm_ip_target", "negative"}},
		{"usage with a non-address", func() error {
			_, err := e.node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: node1, Free: []string{"10.0.0.300"}})
			return err
		}, []string{"free[0]", "10.0.0.300"}},
		{"usage with an address both assigned and free", func() error {
			_, err := e.node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: node1,
				Assigned: []string{"10.0.1.11"}, Free: []string{"10.0.1.11"}})
			return err
		}, []string{"free[0]", "listed twice", "assigned[0]"}},
		{"negative demand", func() error {
			_, err := e.node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: node1, Pending: -3})
			return err
		}, []string{"pending", "negative"}},
		{"ack without release id", func() error {
			_, err := e.node.AckRelease(ctx, &allotv1.AckReleaseRequest{InstanceId: node1})
			return err
		}, []string{"release_id", "required"}},
		{"ack with a misaligned prefix", func() error {
			_, err := e.node.AckRelease(ctx, &allotv1.AckReleaseRequest{InstanceId: node1, ReleaseId: "rel-1",
				Prefixes: []string{"10.0.1.1/28"}})
			return err
		}, []string{"prefixes[0]", "/28"}},
		{"heartbeat without instance", func() error {
			_, err := e.node.Heartbeat(ctx, &allotv1.HeartbeatRequest{})
			return err
		}, []string{"instance_id", "required"}},
		{"budget of a malformed subnet", func() error {
			_, err := e.budget.GetSubnetBudget(ctx, &allotv1.GetSubnetBudgetRequest{SubnetId: "sub-1"})
			return err
		}, []string{"subnet_id", `"sub-1"`}},
		{"negative cap", func() error {
			_, err := e.budget.SetSubnetBudget(ctx, &allotv1.SetSubnetBudgetRequest{SubnetId: subnet1, Cap: -1})
			return err
		}, []string{"cap", "negative"}},
		{"enis of a malformed node", func() error {
			_, err := e.admin.ListENIs(ctx, &allotv1.ListENIsRequest{InstanceId: "i-xyz"})
			return err
		}, []string{"instance_id", `"i-xyz"`}},
		{"watch without instance (stream)", func() error {
			s, err := e.node.WatchNode(ctx, &allotv1.WatchNodeRequest{})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, []string{"instance_id", "required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			wantCode(t, err, codes.InvalidArgument, tc.fragments...)
			if !errors.Is(rpcerr.Error(err), rpcerr.ErrInvalid) {
				t.Fatalf("client side %v is not rpcerr.ErrInvalid", rpcerr.Error(err))
			}
		})
	}
}

func TestRegisterReturnsRecordedENIsAndLimits(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	e.subnet(t, subnet1, "10.0.1.0/24", 251)
	resp := e.register(t, node1, subnet1)
	if len(resp.GetEnis()) != 0 || resp.GetMaxAddresses() != 0 || resp.GetRevision() == 0 {
		t.Fatalf("first registration: %v", resp)
	}
	n, err := e.st.GetNode(ctx, node1)
	if err != nil {
		t.Fatal(err)
	}
	if n.InstanceType != "m5.large" || n.SubnetID != subnet1 || n.Mode != store.ModeSecondaryIP || n.WarmIPTarget != 5 ||
		n.PrimaryENIID != identity(node1, subnet1).GetPrimaryEniId() {
		t.Fatalf("node record %+v", n)
	}

	// The engine learns the limits and records the primary ENI; then a
	// restarted agent registers again.
	e.limits(t, node1, 3, 10)
	if err := e.st.PutPrimaryENI(ctx, store.ENI{ID: n.PrimaryENIID, InstanceID: node1, SubnetID: subnet1,
		MAC: "02:00:00:00:10:01", PrimaryIP: "10.0.1.1"}); err != nil {
		t.Fatal(err)
	}
	e.addENI(t, node1, subnet1, "eni-00000011", 1, []string{"10.0.1.21", "10.0.1.22"})
	resp = e.register(t, node1, subnet1)
	if resp.GetMaxAddresses() != 3*9 {
		t.Fatalf("max_addresses %d, want 27 (limits kept across registrations)", resp.GetMaxAddresses())
	}
	if len(resp.GetEnis()) != 2 {
		t.Fatalf("enis %v", resp.GetEnis())
	}
	prim, sec := resp.GetEnis()[0], resp.GetEnis()[1]
	if !prim.GetPrimary() || prim.GetEniId() != n.PrimaryENIID || sec.GetEniId() != "eni-00000011" ||
		sec.GetDeviceIndex() != 1 || sec.GetSubnetCidr() != "10.0.1.0/24" ||
		!proto.Equal(&allotv1.ENI{Addresses: sec.GetAddresses()}, &allotv1.ENI{Addresses: []string{"10.0.1.21", "10.0.1.22"}}) {
		t.Fatalf("enis %v", resp.GetEnis())
	}

	// max_enis from the agent caps the instance type's limit.
	r2, err := e.node.Register(ctx, &allotv1.RegisterRequest{Node: identity(node1, subnet1), Warm: &allotv1.WarmTargets{MaxEnis: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if r2.GetMaxAddresses() != 2*9 {
		t.Fatalf("max_addresses with max_enis 2: %d", r2.GetMaxAddresses())
	}
}

func TestUnregisteredNodeIsNotFound(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	_, err := e.node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: node1, Pending: 1})
	wantCode(t, err, codes.NotFound, node1, "Register")
	_, err = e.node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: node1})
	wantCode(t, err, codes.NotFound, node1)
	s, err := e.node.WatchNode(ctx, &allotv1.WatchNodeRequest{InstanceId: node1})
	if err == nil {
		_, err = s.Recv()
	}
	wantCode(t, err, codes.NotFound, node1)
	_, err = e.node.Heartbeat(ctx, &allotv1.HeartbeatRequest{InstanceId: node1})
	wantCode(t, err, codes.NotFound)
}

func TestNodeCannotClaimAnotherNodesAddresses(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	e.subnet(t, subnet1, "10.0.1.0/24", 251)
	e.register(t, node1, subnet1)
	e.register(t, node2, subnet1)
	e.addENI(t, node1, subnet1, "eni-00000011", 1, []string{"10.0.1.21", "10.0.1.22", "10.0.1.23"})
	e.addENI(t, node2, subnet1, "eni-00000021", 1, []string{"10.0.1.31", "10.0.1.32"})

	_, err := e.node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: node1, Seq: 1,
		Assigned: []string{"10.0.1.21", "10.0.1.31"}})
	wantCode(t, err, codes.FailedPrecondition, "10.0.1.31", node2, "eni-00000021")
	if !errors.Is(rpcerr.Error(err), rpcerr.ErrNotOwner) {
		t.Fatalf("client side %v is not ErrNotOwner", rpcerr.Error(err))
	}
	_, err = e.node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: node1, Seq: 1, Free: []string{"10.0.9.9"}})
	wantCode(t, err, codes.FailedPrecondition, "10.0.9.9", "none of node "+node1)

	// Nothing of the refused reports was recorded.
	if _, err := e.st.GetUsage(ctx, node1); !errors.Is(err, rpcerr.ErrNotFound) {
		t.Fatalf("usage recorded after refusals: %v", err)
	}

	// An honest report is recorded; an older one is ignored.
	if _, err := e.node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: node1, Seq: 5,
		Assigned: []string{"10.0.1.21"}, Free: []string{"10.0.1.22", "10.0.1.23"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: node1, Seq: 4,
		Assigned: []string{"10.0.1.21", "10.0.1.22", "10.0.1.23"}}); err != nil {
		t.Fatal(err)
	}
	u, err := e.st.GetUsage(ctx, node1)
	if err != nil {
		t.Fatal(err)
	}
	if u.Seq != 5 || len(u.Assigned) != 1 || len(u.Free) != 2 {
		t.Fatalf("usage %+v, want seq 5 with 1 assigned and 2 free", u)
	}
}

func TestNodeCannotAckAnotherNodesRelease(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	e.subnet(t, subnet1, "10.0.1.0/24", 251)
	e.register(t, node1, subnet1)
	e.register(t, node2, subnet1)
	e.addENI(t, node2, subnet1, "eni-00000021", 1, []string{"10.0.1.31", "10.0.1.32", "10.0.1.33"})
	rel, err := e.st.ProposeRelease(ctx, store.Release{InstanceID: node2, ENIID: "eni-00000021",
		Addresses: []string{"10.0.1.32", "10.0.1.33"}})
	if err != nil {
		t.Fatal(err)
	}

	_, err = e.node.AckRelease(ctx, &allotv1.AckReleaseRequest{InstanceId: node1, ReleaseId: rel.ID,
		Addresses: []string{"10.0.1.32"}})
	wantCode(t, err, codes.FailedPrecondition, rel.ID)
	if !errors.Is(rpcerr.Error(err), rpcerr.ErrNotOwner) {
		t.Fatalf("client side %v is not ErrNotOwner", rpcerr.Error(err))
	}
	// The owner may not slip in an address that was not proposed.
	_, err = e.node.AckRelease(ctx, &allotv1.AckReleaseRequest{InstanceId: node2, ReleaseId: rel.ID,
		Addresses: []string{"10.0.1.31"}})
	wantCode(t, err, codes.InvalidArgument, "10.0.1.31")

	got, err := e.st.ListReleases(ctx, node2)
	if err != nil || len(got) != 1 || got[0].State != store.ReleaseProposed || len(got[0].AckedAddrs) != 0 {
		t.Fatalf("release after refused acks: %+v, %v", got, err)
	}

	if _, err := e.node.AckRelease(ctx, &allotv1.AckReleaseRequest{InstanceId: node2, ReleaseId: rel.ID,
		Addresses: []string{"10.0.1.33"}}); err != nil {
		t.Fatal(err)
	}
	got, err = e.st.ListReleases(ctx, node2)
	if err != nil || got[0].State != store.ReleaseAcked || len(got[0].AckedAddrs) != 1 || got[0].AckedAddrs[0] != "10.0.1.33" {
		t.Fatalf("release after ack: %+v, %v", got, err)
	}
}

func TestHeartbeatMakesNodeAlive(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	e.register(t, node1, subnet1)
	if _, err := e.node.Heartbeat(ctx, &allotv1.HeartbeatRequest{InstanceId: node1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: node1, Pending: 3, WarmShortfall: 2}); err != nil {
		t.Fatal(err)
	}
	nodes, err := e.admin.ListNodes(ctx, &allotv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.GetNodes()) != 1 || !nodes.GetNodes()[0].GetAlive() ||
		nodes.GetNodes()[0].GetPending() != 3 || nodes.GetNodes()[0].GetWarmShortfall() != 2 {
		t.Fatalf("nodes %v", nodes)
	}
}

// recvEvent receives the next NodeEvent or fails.
func recvEvent(t *testing.T, s allotv1.NodeService_WatchNodeClient) *allotv1.NodeEvent {
	t.Helper()
	ev, err := s.Recv()
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	return ev
}

func TestWatchNodeSendsSnapshotsOnChange(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	e.subnet(t, subnet1, "10.0.1.0/24", 251)
	e.register(t, node1, subnet1)
	e.register(t, node2, subnet1)

	s, err := e.node.WatchNode(ctx, &allotv1.WatchNodeRequest{InstanceId: node1})
	if err != nil {
		t.Fatal(err)
	}
	first := recvEvent(t, s)
	if len(first.GetEnis()) != 0 || len(first.GetReleases()) != 0 || first.GetRevision() == 0 {
		t.Fatalf("first snapshot %v", first)
	}

	// An ENI attached for the node arrives as a new full snapshot.
	e.addENI(t, node1, subnet1, "eni-00000011", 1, []string{"10.0.1.21", "10.0.1.22"})
	ev := recvEvent(t, s)
	for len(ev.GetEnis()) == 0 || ev.GetEnis()[0].GetDeviceIndex() != 1 {
		// The created-but-not-attached state may come first.
		ev = recvEvent(t, s)
	}
	if ev.GetEnis()[0].GetEniId() != "eni-00000011" || len(ev.GetEnis()[0].GetAddresses()) != 2 ||
		ev.GetEnis()[0].GetSubnetCidr() != "10.0.1.0/24" || ev.GetRevision() <= first.GetRevision() {
		t.Fatalf("snapshot after attach %v", ev)
	}

	// A change of another node sends nothing to this one: the next event
	// is the release proposed afterwards, not a copy of the last snapshot.
	e.addENI(t, node2, subnet1, "eni-00000021", 1, []string{"10.0.1.31"})
	rel, err := e.st.ProposeRelease(ctx, store.Release{InstanceID: node1, ENIID: "eni-00000011", Addresses: []string{"10.0.1.22"}})
	if err != nil {
		t.Fatal(err)
	}
	ev = recvEvent(t, s)
	if len(ev.GetReleases()) != 1 || ev.GetReleases()[0].GetReleaseId() != rel.ID ||
		len(ev.GetReleases()[0].GetAddresses()) != 1 || ev.GetReleases()[0].GetAddresses()[0] != "10.0.1.22" ||
		ev.GetReleases()[0].GetState() != allotv1.ReleaseState_RELEASE_STATE_PROPOSED || !ev.GetReleaseStates() {
		t.Fatalf("snapshot after proposal %v", ev)
	}

	// Once acknowledged the release is listed as such until carried out,
	// so the agent need not ask again to learn that its answer was taken.
	if _, err := e.node.AckRelease(ctx, &allotv1.AckReleaseRequest{InstanceId: node1, ReleaseId: rel.ID,
		Addresses: []string{"10.0.1.22"}}); err != nil {
		t.Fatal(err)
	}
	ev = recvEvent(t, s)
	if len(ev.GetReleases()) != 1 || ev.GetReleases()[0].GetState() != allotv1.ReleaseState_RELEASE_STATE_ACKED || len(ev.GetEnis()) != 1 {
		t.Fatalf("snapshot after ack %v", ev)
	}
	if err := e.st.FinishRelease(ctx, rel.ID); err != nil {
		t.Fatal(err)
	}
	ev = recvEvent(t, s)
	if len(ev.GetReleases()) != 0 || len(ev.GetEnis()) != 1 {
		t.Fatalf("snapshot after the release was done %v", ev)
	}
}

func TestWatchNodeEndsUnavailableOnStop(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	e.register(t, node1, subnet1)
	s, err := e.node.WatchNode(ctx, &allotv1.WatchNodeRequest{InstanceId: node1})
	if err != nil {
		t.Fatal(err)
	}
	recvEvent(t, s)
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	go e.srv.Stop(stopCtx)
	_, err = s.Recv()
	wantCode(t, err, codes.Unavailable, "shutting down")
}

// The Kubernetes node name an agent registers with is recorded, listed by
// ListNodes, and known to the replica's view (which the broker's log lines
// take it from); registering again without one clears it.
func TestRegisterRecordsNodeName(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	e.subnet(t, subnet1, "10.0.1.0/24", 251)
	const name = "ip-10-0-1-10.ec2.internal"
	if _, err := e.node.Register(ctx, &allotv1.RegisterRequest{Node: identity(node1, subnet1), NodeName: name}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.st.GetNode(ctx, node1); err != nil || n.NodeName != name {
		t.Fatalf("node record %+v, %v", n, err)
	}
	resp, err := e.admin.ListNodes(ctx, &allotv1.ListNodesRequest{})
	if err != nil || len(resp.GetNodes()) != 1 || resp.GetNodes()[0].GetNodeName() != name {
		t.Fatalf("ListNodes %v, %v", resp, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.srv.NodeName(node1) != name {
		if time.Now().After(deadline) {
			t.Fatalf("the replica's view has no name for %s", node1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.register(t, node1, subnet1)
	if n, err := e.st.GetNode(ctx, node1); err != nil || n.NodeName != "" {
		t.Fatalf("after registering without a name: %+v, %v", n, err)
	}
}
