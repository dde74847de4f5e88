package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/agent/attestation"
	"github.com/allotnet/allot/agent/identity"
	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/broker/auth/devca"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/instanceview"
	"github.com/allotnet/allot/broker/ratelimit"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

const (
	instA     = "i-0a0000000000000a1"
	instB     = "i-0a0000000000000b2"
	instOther = "i-0a0000000000000c3" // in a VPC this broker does not serve
	servedVPC = "vpc-0a000001"
)

// reached counts the calls that got past the authorizer.
type reached struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *reached) hit(m string) {
	r.mu.Lock()
	r.n[m]++
	r.mu.Unlock()
}

func (r *reached) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := 0
	for _, n := range r.n {
		t += n
	}
	return t
}

// watchNode counts a WatchNode that got past the check of its request; the
// rest of NodeService, BudgetService and AdminService are unimplemented, so
// a call that passes the authorizer answers Unimplemented.
type watchNode struct {
	allotv1.UnimplementedNodeServiceServer
	r *reached
}

func (w *watchNode) WatchNode(*allotv1.WatchNodeRequest, grpc.ServerStreamingServer[allotv1.NodeEvent]) error {
	w.r.hit(allotv1.NodeService_WatchNode_FullMethodName)
	return status.Error(codes.Unimplemented, "test")
}

type env struct {
	sim     *awssim.Sim
	ca      *devca.CA
	addr    string
	reached *reached
	cache   *instanceview.Cache
	store   *EtcdStore
}

func startEnv(t *testing.T) *env {
	t.Helper()
	sim, err := awssim.Start(context.Background(), awssim.Config{Scenario: scenario.Scenario{
		Region: "us-east-1", AccountID: "123456789012",
		VPCs: []scenario.VPC{
			{ID: servedVPC, CIDRs: []string{"10.0.0.0/16"}, Subnets: []scenario.Subnet{{ID: "subnet-0a000001", CIDR: "10.0.0.0/20", AZ: "us-east-1a"}}},
			{ID: "vpc-0b000002", CIDRs: []string{"10.9.0.0/16"}, Subnets: []scenario.Subnet{{ID: "subnet-0b000001", CIDR: "10.9.0.0/20", AZ: "us-east-1a"}}},
		},
		Instances: []scenario.Instance{
			{ID: instA, Subnet: "subnet-0a000001", Type: "c5.xlarge"},
			{ID: instB, Subnet: "subnet-0a000001", Type: "c5.xlarge"},
			{ID: instOther, Subnet: "subnet-0b000001", Type: "c5.xlarge"},
		},
		IMDS: scenario.IMDS{TokenRequired: true},
	}, TimeScale: 100, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	ec2c, err := ec2client.New(context.Background(), ec2client.Config{
		Region: "us-east-1", Endpoint: sim.EC2Endpoint(), Limiter: ratelimit.New(ratelimit.Config{TimeScale: 1000}),
	})
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := sim.IdentityCertificatePEM()
	if err != nil {
		t.Fatal(err)
	}
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	st := NewEtcdStore(etcdembedtest.Start(t), "/allot/v1/test/")
	signer := NewSigner(st, nil)
	cache := instanceview.New(ec2c, 0, nil)
	att, err := NewAttester(AttestConfig{
		Certificates: certs, Region: "us-east-1", VPCIDs: []string{servedVPC},
		Instances: cache, Store: st, Signer: signer,
	})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := devca.New("allot test CA")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Server("127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := leaf.TLS()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{sim: sim, ca: ca, reached: &reached{n: map[string]int{}}, cache: cache, store: st}
	z := NewAuthorizer(signer)
	count := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !isPublic(info.FullMethod) {
			e.reached.hit(info.FullMethod)
		}
		return h(ctx, req)
	}
	gs := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(&tls.Config{
			MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair},
			ClientCAs: ca.Pool(), ClientAuth: tls.VerifyClientCertIfGiven,
		})),
		grpc.ChainUnaryInterceptor(z.UnaryServerInterceptor(), count),
		grpc.ChainStreamInterceptor(z.StreamServerInterceptor()),
	)
	allotv1.RegisterAuthServiceServer(gs, NewService(att))
	allotv1.RegisterNodeServiceServer(gs, &watchNode{r: e.reached})
	allotv1.RegisterBudgetServiceServer(gs, allotv1.UnimplementedBudgetServiceServer{})
	allotv1.RegisterAdminServiceServer(gs, allotv1.UnimplementedAdminServiceServer{})
	allotv1.RegisterPodNetworkServiceServer(gs, allotv1.UnimplementedPodNetworkServiceServer{})
	healthpb.RegisterHealthServer(gs, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	e.addr = lis.Addr().String()
	return e
}

// dial connects with the broker's CA, an optional client certificate and
// options.
func (e *env) dial(t *testing.T, cert *devca.Leaf, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: e.ca.Pool(), ServerName: "127.0.0.1"}
	if cert != nil {
		pair, err := cert.TLS()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	c, err := grpc.NewClient(e.addr, append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// node connects as the agent on instance id does: its own node key, its
// IMDS, attestation through the connection.
func (e *env) node(t *testing.T, id string) (*grpc.ClientConn, *attestation.Credentials) {
	t.Helper()
	url, err := e.sim.IMDSEndpoint(id)
	if err != nil {
		t.Fatal(err)
	}
	md, err := identity.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	creds, err := attestation.New(attestation.Config{IMDS: md, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	conn := e.dial(t, nil, creds.DialOptions()...)
	creds.Bind(allotv1.NewAuthServiceClient(conn))
	return conn, creds
}

func (e *env) client(t *testing.T, cn string, uris ...string) *grpc.ClientConn {
	t.Helper()
	leaf, err := e.ca.Client(cn, uris...)
	if err != nil {
		t.Fatal(err)
	}
	return e.dial(t, &leaf)
}

// call runs one method of the broker's API with a request for instance id
// and returns the code.
func call(conn *grpc.ClientConn, method, id string) codes.Code {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	node := allotv1.NewNodeServiceClient(conn)
	budget := allotv1.NewBudgetServiceClient(conn)
	admin := allotv1.NewAdminServiceClient(conn)
	podnet := allotv1.NewPodNetworkServiceClient(conn)
	var err error
	switch method {
	case "Register":
		_, err = node.Register(ctx, &allotv1.RegisterRequest{Node: &allotv1.NodeIdentity{InstanceId: id}})
	case "SetDemand":
		_, err = node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: id, Pending: 40})
	case "ReportUsage":
		_, err = node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: id, Seq: 1})
	case "AckRelease":
		_, err = node.AckRelease(ctx, &allotv1.AckReleaseRequest{InstanceId: id, ReleaseId: "rel-1"})
	case "Heartbeat":
		_, err = node.Heartbeat(ctx, &allotv1.HeartbeatRequest{InstanceId: id})
	case "WatchNode":
		var s grpc.ServerStreamingClient[allotv1.NodeEvent]
		if s, err = node.WatchNode(ctx, &allotv1.WatchNodeRequest{InstanceId: id}); err == nil {
			_, err = s.Recv()
		}
	case "ListSubnetBudgets":
		_, err = budget.ListSubnetBudgets(ctx, &allotv1.ListSubnetBudgetsRequest{})
	case "SetSubnetBudget":
		_, err = budget.SetSubnetBudget(ctx, &allotv1.SetSubnetBudgetRequest{SubnetId: "subnet-0a000001", Cap: 1})
	case "ListNodes":
		_, err = admin.ListNodes(ctx, &allotv1.ListNodesRequest{})
	case "SetPodNetwork":
		_, err = podnet.SetPodNetwork(ctx, &allotv1.SetPodNetworkRequest{Network: &allotv1.PodNetwork{
			Name: "pods-a", SubnetIds: []string{"subnet-0a000001"}}})
	case "DeletePodNetwork":
		_, err = podnet.DeletePodNetwork(ctx, &allotv1.DeletePodNetworkRequest{Name: "pods-a"})
	case "ListPodNetworks":
		_, err = podnet.ListPodNetworks(ctx, &allotv1.ListPodNetworksRequest{})
	case "Health":
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	default:
		panic(method)
	}
	return status.Code(err)
}

// TestWhoMayCallWhat drives the policy end to end over TLS: each caller,
// each method, the code it gets, and whether the call reached the
// services behind the authorizer. Unimplemented means it did: the test's
// services implement nothing, so a call answered Unimplemented passed.
func TestWhoMayCallWhat(t *testing.T) {
	e := startEnv(t)
	nodeA, _ := e.node(t, instA)
	anon := e.dial(t, nil)
	planner := e.client(t, "planner", RoleURI(RolePlanner, ""))
	cnPlanner := e.client(t, "planner") // a CN alone names no role
	admin := e.client(t, "ops", RoleURI(RoleAdmin, ""))
	nodeCertB := e.client(t, "node-b", RoleURI(RoleNode, instB))
	bogus := e.dial(t, nil, grpc.WithUnaryInterceptor(func(ctx context.Context, m string, req, reply any, cc *grpc.ClientConn, inv grpc.UnaryInvoker, o ...grpc.CallOption) error {
		return inv(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer v1.e30.AAAA"), m, req, reply, cc, o...)
	}))
	const ok = codes.Unimplemented // passed the authorizer
	for _, tc := range []struct {
		who  string
		conn *grpc.ClientConn
		m    string
		id   string
		want codes.Code
	}{
		{"anonymous", anon, "Register", instA, codes.Unauthenticated},
		{"anonymous", anon, "SetDemand", instA, codes.Unauthenticated},
		{"anonymous", anon, "ListSubnetBudgets", "", codes.Unauthenticated},
		{"anonymous", anon, "WatchNode", instA, codes.Unauthenticated},
		{"anonymous", anon, "Health", "", codes.OK},
		{"anonymous", anon, "SetPodNetwork", "", codes.Unauthenticated},
		{"anonymous", anon, "ListPodNetworks", "", codes.Unauthenticated},
		{"bogus token", bogus, "SetPodNetwork", "", codes.Unauthenticated},
		{"bogus token", bogus, "Register", instA, codes.Unauthenticated},
		{"bogus token", bogus, "ListNodes", "", codes.Unauthenticated},

		{"node A", nodeA, "Register", instA, ok},
		{"node A", nodeA, "SetDemand", instA, ok},
		{"node A", nodeA, "WatchNode", instA, ok},
		{"node A", nodeA, "Register", instB, codes.PermissionDenied},
		{"node A", nodeA, "SetDemand", instB, codes.PermissionDenied},
		{"node A", nodeA, "ReportUsage", instB, codes.PermissionDenied},
		{"node A", nodeA, "AckRelease", instB, codes.PermissionDenied},
		{"node A", nodeA, "Heartbeat", instB, codes.PermissionDenied},
		{"node A", nodeA, "WatchNode", instB, codes.PermissionDenied},
		{"node A", nodeA, "SetSubnetBudget", "", codes.PermissionDenied},
		{"node A", nodeA, "ListSubnetBudgets", "", codes.PermissionDenied},
		{"node A", nodeA, "ListNodes", "", codes.PermissionDenied},
		{"node A", nodeA, "SetPodNetwork", "", codes.PermissionDenied},
		{"node A", nodeA, "DeletePodNetwork", "", codes.PermissionDenied},
		{"node A", nodeA, "ListPodNetworks", "", codes.PermissionDenied},
		{"node B by certificate", nodeCertB, "SetPodNetwork", "", codes.PermissionDenied},

		{"node B by certificate", nodeCertB, "SetDemand", instB, ok},
		{"node B by certificate", nodeCertB, "SetDemand", instA, codes.PermissionDenied},

		{"planner", planner, "ListSubnetBudgets", "", ok},
		{"planner", planner, "SetSubnetBudget", "", codes.PermissionDenied},
		{"planner", planner, "SetDemand", instA, codes.PermissionDenied},
		{"planner", planner, "ListNodes", "", codes.PermissionDenied},
		{"planner", planner, "ListPodNetworks", "", ok},
		{"planner", planner, "SetPodNetwork", "", codes.PermissionDenied},
		{"planner", planner, "DeletePodNetwork", "", codes.PermissionDenied},
		{"CN planner, no role", cnPlanner, "ListSubnetBudgets", "", codes.PermissionDenied},
		{"CN planner, no role", cnPlanner, "SetSubnetBudget", "", codes.PermissionDenied},

		{"admin", admin, "SetSubnetBudget", "", ok},
		{"admin", admin, "ListNodes", "", ok},
		{"admin", admin, "ListSubnetBudgets", "", ok},
		{"admin", admin, "SetPodNetwork", "", ok},
		{"admin", admin, "DeletePodNetwork", "", ok},
		{"admin", admin, "ListPodNetworks", "", ok},
		{"admin", admin, "SetDemand", instA, codes.PermissionDenied},
	} {
		before := e.reached.total()
		got := call(tc.conn, tc.m, tc.id)
		if got != tc.want {
			t.Errorf("%s %s(%s) = %v, want %v", tc.who, tc.m, tc.id, got, tc.want)
		}
		passed := e.reached.total() - before
		if want := map[bool]int{true: 1, false: 0}[tc.want == ok]; passed != want {
			t.Errorf("%s %s(%s): %d calls reached the services, want %d", tc.who, tc.m, tc.id, passed, want)
		}
	}
	// Node A's calls cost one attestation and one DescribeInstances.
	if n := e.sim.Counters()["DescribeInstances"].Calls; n != 1 {
		t.Errorf("DescribeInstances calls = %d, want 1 (cached)", n)
	}
}
