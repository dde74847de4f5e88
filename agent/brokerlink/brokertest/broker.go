// Package brokertest is a small stateful stand-in for the broker's
// NodeService, for agent tests that need to control exactly when addresses
// arrive, when the broker is down, and what it proposes to release. It
// serves real gRPC on 127.0.0.1 and changes the simulated EC2 (awssim's
// world) for every address it hands out or takes back, so the agent's IMDS
// confirmation sees what it would in production.
package brokertest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/allotnet/allot/awssim/world"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// Broker is the fake broker.
type Broker struct {
	allotv1.UnimplementedNodeServiceServer
	world *world.World
	srv   *grpc.Server
	conn  *grpc.ClientConn
	addr  string

	mu       sync.Mutex
	down     bool
	rev      int64
	nodes    map[string]*node
	changed  chan struct{} // closed and replaced on every change
	calls    map[string]int
	failAck  error
	failNext map[string]failN
	holds    map[string]*hold
	auto     bool
	releases map[string]*release
	nextRel  int
}

// hold keeps a method's calls waiting until release is closed.
type hold struct {
	entered chan struct{}
	release chan struct{}
}

// failN makes the next n calls of a method fail with err.
type failN struct {
	n   int
	err error
}

type node struct {
	id       *allotv1.NodeIdentity
	enis     []*allotv1.ENI // the primary first
	demand   *allotv1.SetDemandRequest
	usage    *allotv1.ReportUsageRequest
	register *allotv1.RegisterRequest
}

type release struct {
	instance string
	eniID    string
	proposal *allotv1.ReleaseProposal
	acked    bool
	ack      *allotv1.AckReleaseRequest
}

// Start serves a fake broker over w until the test ends.
func Start(t testing.TB, w *world.World) *Broker {
	t.Helper()
	b := &Broker{world: w, nodes: map[string]*node{}, changed: make(chan struct{}), calls: map[string]int{},
		releases: map[string]*release{}, failNext: map[string]failN{}, holds: map[string]*hold{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = lis.Addr().String()
	b.srv = grpc.NewServer()
	allotv1.RegisterNodeServiceServer(b.srv, b)
	go func() { _ = b.srv.Serve(lis) }()
	b.conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = b.conn.Close()
		b.srv.Stop()
	})
	return b
}

// Addr is the fake's gRPC address.
func (b *Broker) Addr() string { return b.addr }

// Client is a client of the fake over real gRPC.
func (b *Broker) Client() allotv1.NodeServiceClient { return allotv1.NewNodeServiceClient(b.conn) }

// SetDown makes every call fail with Unavailable and ends open streams
// (down) or lets calls through again (up).
func (b *Broker) SetDown(down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down = down
	b.bumpLocked()
}

// SetAutoDeliver makes the broker deliver, on every demand with waiting
// ADDs, as many addresses as are waiting.
func (b *Broker) SetAutoDeliver(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.auto = on
}

// FailAcks makes AckRelease fail with err (nil: succeed).
func (b *Broker) FailAcks(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failAck = err
}

// FailNext makes the next n calls of method ("SetDemand", ...) fail with
// err, as a busy broker refuses calls (codes.Unavailable) or a broker
// turns one down.
func (b *Broker) FailNext(method string, n int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failNext[method] = failN{n: n, err: err}
}

// Hold makes calls of method ("SetDemand", ...) wait, as calls wait for a
// slow etcd in a real broker, until release is called (or the caller gives
// up). entered receives once a call waits.
func (b *Broker) Hold(method string) (entered <-chan struct{}, release func()) {
	h := &hold{entered: make(chan struct{}, 1), release: make(chan struct{})}
	b.mu.Lock()
	b.holds[method] = h
	b.mu.Unlock()
	var once sync.Once
	return h.entered, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.holds, method)
			b.mu.Unlock()
			close(h.release)
		})
	}
}

// wait waits while method's calls are held.
func (b *Broker) wait(ctx context.Context, method string) {
	b.mu.Lock()
	h := b.holds[method]
	b.mu.Unlock()
	if h == nil {
		return
	}
	select {
	case h.entered <- struct{}{}:
	default:
	}
	select {
	case <-h.release:
	case <-ctx.Done():
	}
}

// Calls returns how many times method ("Register", "SetDemand", ...) was
// called, failed calls included.
func (b *Broker) Calls(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[method]
}

// Demand returns the node's last demand (nil if none).
func (b *Broker) Demand(instance string) *allotv1.SetDemandRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.nodes[instance]; n != nil && n.demand != nil {
		return proto.CloneOf(n.demand)
	}
	return nil
}

// Usage returns the node's last usage report (nil if none).
func (b *Broker) Usage(instance string) *allotv1.ReportUsageRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.nodes[instance]; n != nil && n.usage != nil {
		return proto.CloneOf(n.usage)
	}
	return nil
}

// Registration returns the node's last registration (nil if none).
func (b *Broker) Registration(instance string) *allotv1.RegisterRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.nodes[instance]; n != nil && n.register != nil {
		return proto.CloneOf(n.register)
	}
	return nil
}

// WaitFor polls cond every few milliseconds until it holds, failing the
// test after timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Deliver assigns n secondary addresses to the node's primary ENI in EC2
// (awssim) and lists them in the node's record. It returns them.
func (b *Broker) Deliver(instance string, n int) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.deliverLocked(instance, n)
}

func (b *Broker) deliverLocked(instance string, n int) ([]string, error) {
	nd := b.nodes[instance]
	if nd == nil {
		return nil, fmt.Errorf("node %s not registered", instance)
	}
	p := nd.enis[0]
	res, err := b.world.AssignPrivateIPAddresses(world.AssignInput{ENIID: p.GetEniId(), Count: n})
	if err != nil {
		return nil, err
	}
	p.Addresses = append(p.Addresses, res.Addresses...)
	b.bumpLocked()
	return res.Addresses, nil
}

// AttachENI creates an ENI with n secondary addresses in the primary ENI's
// subnet, attaches it at the next device index (EC2 through awssim) and
// lists it in the node's record. It returns the ENI's ID and addresses.
func (b *Broker) AttachENI(instance string, n int) (string, []string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	nd := b.nodes[instance]
	if nd == nil {
		return "", nil, fmt.Errorf("node %s not registered", instance)
	}
	prim := nd.enis[0]
	e, err := b.world.CreateNetworkInterface(world.CreateNetworkInterfaceInput{SubnetID: prim.GetSubnetId(), SecondaryCount: n})
	if err != nil {
		return "", nil, err
	}
	dev := len(nd.enis)
	if _, err := b.world.AttachNetworkInterface(e.ID, instance, dev); err != nil {
		return "", nil, err
	}
	nd.enis = append(nd.enis, &allotv1.ENI{
		EniId: e.ID, Mac: e.MAC, DeviceIndex: int32(dev), SubnetId: e.SubnetID, SubnetCidr: prim.GetSubnetCidr(),
		PrimaryIp: e.PrivateIP, Addresses: slices.Clone(e.SecondaryIPs),
	})
	b.bumpLocked()
	return e.ID, slices.Clone(e.SecondaryIPs), nil
}

// DeliverPrefixes delegates n /28 prefixes to the node's primary ENI in EC2
// (awssim) and lists them in the node's record. It returns them.
func (b *Broker) DeliverPrefixes(instance string, n int) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	nd := b.nodes[instance]
	if nd == nil {
		return nil, fmt.Errorf("node %s not registered", instance)
	}
	p := nd.enis[0]
	res, err := b.world.AssignPrivateIPAddresses(world.AssignInput{ENIID: p.GetEniId(), PrefixCount: n})
	if err != nil {
		return nil, err
	}
	p.Prefixes = append(p.Prefixes, res.Prefixes...)
	b.bumpLocked()
	return res.Prefixes, nil
}

// Propose records a release proposal of addrs (on the primary ENI) and
// returns its ID.
func (b *Broker) Propose(instance string, addrs []string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextRel++
	id := fmt.Sprintf("rel-%d", b.nextRel)
	b.releases[id] = &release{instance: instance, eniID: b.nodes[instance].enis[0].GetEniId(),
		proposal: &allotv1.ReleaseProposal{ReleaseId: id, Addresses: slices.Clone(addrs)}}
	b.bumpLocked()
	return id
}

// Withdraw deletes a release, as the broker does with one left
// unacknowledged too long.
func (b *Broker) Withdraw(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.releases, id)
	b.bumpLocked()
}

// Ack returns what the agent acknowledged for a release.
func (b *Broker) Ack(id string) (*allotv1.AckReleaseRequest, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.releases[id]
	if r == nil || !r.acked {
		return nil, false
	}
	return proto.CloneOf(r.ack), true
}

// CarryOut unassigns what the agent acknowledged for a release, in EC2 and
// in the node's record, and marks it done.
func (b *Broker) CarryOut(id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.releases[id]
	if r == nil || !r.acked {
		return fmt.Errorf("release %s not acknowledged", id)
	}
	if len(r.ack.GetAddresses()) > 0 {
		if err := b.world.UnassignPrivateIPAddresses(world.UnassignInput{ENIID: r.eniID, Addresses: r.ack.GetAddresses()}); err != nil {
			return err
		}
	}
	for _, e := range b.nodes[r.instance].enis {
		if e.GetEniId() == r.eniID {
			e.Addresses = slices.DeleteFunc(e.Addresses, func(a string) bool { return slices.Contains(r.ack.GetAddresses(), a) })
		}
	}
	b.bumpLocked()
	return nil
}

// Forget drops addresses from the node's record without touching EC2, as a
// broker whose records drifted would.
func (b *Broker) Forget(instance string, addrs []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.nodes[instance].enis {
		e.Addresses = slices.DeleteFunc(e.Addresses, func(a string) bool { return slices.Contains(addrs, a) })
	}
	b.bumpLocked()
}

func (b *Broker) bumpLocked() {
	b.rev++
	close(b.changed)
	b.changed = make(chan struct{})
}

// begin counts a call and refuses it while the broker is down.
func (b *Broker) begin(method string) error {
	b.calls[method]++
	if b.down {
		return status.Error(codes.Unavailable, "fake broker is down")
	}
	if f := b.failNext[method]; f.n > 0 {
		f.n--
		b.failNext[method] = f
		return f.err
	}
	return nil
}

func (b *Broker) nodeLocked(id string) (*node, error) {
	n := b.nodes[id]
	if n == nil {
		return nil, status.Errorf(codes.NotFound, "node %s is not registered", id)
	}
	return n, nil
}

func (b *Broker) snapshotLocked(id string) *allotv1.NodeEvent {
	ev := &allotv1.NodeEvent{Revision: b.rev}
	for _, e := range b.nodes[id].enis {
		ev.Enis = append(ev.Enis, proto.CloneOf(e))
	}
	for _, r := range b.releases {
		if r.instance == id && !r.acked {
			ev.Releases = append(ev.Releases, proto.CloneOf(r.proposal))
		}
	}
	slices.SortFunc(ev.Releases, func(x, y *allotv1.ReleaseProposal) int {
		return compareStrings(x.GetReleaseId(), y.GetReleaseId())
	})
	return ev
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Register records the node; its record starts with the primary ENI and no
// addresses, or keeps what it had.
func (b *Broker) Register(_ context.Context, req *allotv1.RegisterRequest) (*allotv1.RegisterResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.begin("Register"); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	id := req.GetNode()
	n := b.nodes[id.GetInstanceId()]
	if n == nil {
		e, ok := b.world.NetworkInterface(id.GetPrimaryEniId())
		if !ok {
			return nil, status.Errorf(codes.InvalidArgument, "no ENI %s", id.GetPrimaryEniId())
		}
		sn, _ := b.world.Subnet(e.SubnetID)
		n = &node{enis: []*allotv1.ENI{{
			EniId: e.ID, Mac: e.MAC, DeviceIndex: 0, SubnetId: e.SubnetID, SubnetCidr: sn.CIDR,
			PrimaryIp: e.PrivateIP, Primary: true,
		}}}
		b.nodes[id.GetInstanceId()] = n
		b.bumpLocked()
	}
	n.id, n.register = proto.CloneOf(id), proto.CloneOf(req)
	resp := &allotv1.RegisterResponse{Revision: b.rev}
	for _, e := range n.enis {
		resp.Enis = append(resp.Enis, proto.CloneOf(e))
	}
	return resp, nil
}

// ReportUsage records the report.
func (b *Broker) ReportUsage(_ context.Context, req *allotv1.ReportUsageRequest) (*allotv1.ReportUsageResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.begin("ReportUsage"); err != nil {
		return nil, err
	}
	n, err := b.nodeLocked(req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	if n.usage == nil || req.GetSeq() > n.usage.GetSeq() {
		n.usage = proto.CloneOf(req)
	}
	return &allotv1.ReportUsageResponse{}, nil
}

// SetDemand records the demand, and delivers the waiting ADDs' addresses
// when auto-delivery is on.
func (b *Broker) SetDemand(ctx context.Context, req *allotv1.SetDemandRequest) (*allotv1.SetDemandResponse, error) {
	b.wait(ctx, "SetDemand")
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.begin("SetDemand"); err != nil {
		return nil, err
	}
	n, err := b.nodeLocked(req.GetInstanceId())
	if err != nil {
		return nil, err
	}
	n.demand = proto.CloneOf(req)
	if b.auto && req.GetPending() > 0 {
		if _, err := b.deliverLocked(req.GetInstanceId(), int(req.GetPending())); err != nil {
			return nil, status.Error(codes.ResourceExhausted, err.Error())
		}
	}
	return &allotv1.SetDemandResponse{}, nil
}

// WatchNode sends the node's snapshot now and after every change, until
// the broker goes down.
func (b *Broker) WatchNode(req *allotv1.WatchNodeRequest, stream allotv1.NodeService_WatchNodeServer) error {
	b.mu.Lock()
	err := b.begin("WatchNode")
	b.mu.Unlock()
	if err != nil {
		return err
	}
	for {
		b.mu.Lock()
		if b.down {
			b.mu.Unlock()
			return status.Error(codes.Unavailable, "fake broker is down")
		}
		if _, err := b.nodeLocked(req.GetInstanceId()); err != nil {
			b.mu.Unlock()
			return err
		}
		ev := b.snapshotLocked(req.GetInstanceId())
		changed := b.changed
		b.mu.Unlock()
		if err := stream.Send(ev); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-changed:
		}
	}
}

// AckRelease records the agent's answer as the broker's store does: a
// repeated identical answer is accepted, a different one is WRONG_STATE, an
// unknown release is NotFound.
func (b *Broker) AckRelease(_ context.Context, req *allotv1.AckReleaseRequest) (*allotv1.AckReleaseResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.begin("AckRelease"); err != nil {
		return nil, err
	}
	if b.failAck != nil {
		return nil, b.failAck
	}
	r := b.releases[req.GetReleaseId()]
	if r == nil || r.instance != req.GetInstanceId() {
		return nil, status.Errorf(codes.NotFound, "release %s not found", req.GetReleaseId())
	}
	for _, a := range req.GetAddresses() {
		if !slices.Contains(r.proposal.GetAddresses(), a) {
			return nil, status.Errorf(codes.InvalidArgument, "release %s did not propose %s", r.proposal.GetReleaseId(), a)
		}
	}
	if r.acked {
		if !slices.Equal(sorted(r.ack.GetAddresses()), sorted(req.GetAddresses())) {
			// Encoded by the broker's own table, as the real server does.
			return nil, rpcerr.Status(fmt.Errorf("release %s was already answered differently: %w", req.GetReleaseId(), rpcerr.ErrWrongState))
		}
		return &allotv1.AckReleaseResponse{}, nil
	}
	r.acked, r.ack = true, proto.CloneOf(req)
	b.bumpLocked()
	return &allotv1.AckReleaseResponse{}, nil
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// Heartbeat accepts.
func (b *Broker) Heartbeat(_ context.Context, req *allotv1.HeartbeatRequest) (*allotv1.HeartbeatResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.begin("Heartbeat"); err != nil {
		return nil, err
	}
	if _, err := b.nodeLocked(req.GetInstanceId()); err != nil {
		return nil, err
	}
	return &allotv1.HeartbeatResponse{}, nil
}
