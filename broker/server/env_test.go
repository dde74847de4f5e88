package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// env is a server on 127.0.0.1 over a fresh embedded etcd, with clients.
type env struct {
	st     *store.Store
	srv    *Server
	addr   string
	node   allotv1.NodeServiceClient
	budget allotv1.BudgetServiceClient
	admin  allotv1.AdminServiceClient
	conn   *grpc.ClientConn
}

type fixedLeader string

func (f fixedLeader) Leader(context.Context) (string, error) { return string(f), nil }

func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := store.Open(etcdembedtest.Start(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	return newEnvOn(t, st)
}

func newEnvOn(t *testing.T, st *store.Store) *env {
	t.Helper()
	srv, err := New(Config{
		Store:          st,
		Leader:         fixedLeader("broker-a"),
		Logger:         slog.New(slog.DiscardHandler),
		Coalesce:       5 * time.Millisecond,
		HealthInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveLocal(t, srv)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &env{
		st: st, srv: srv, addr: addr, conn: conn,
		node:   allotv1.NewNodeServiceClient(conn),
		budget: allotv1.NewBudgetServiceClient(conn),
		admin:  allotv1.NewAdminServiceClient(conn),
	}
}

// serveLocal serves srv on a loopback port until the test ends (the
// cleanups registered after it, such as closing clients, run first) and
// returns its address.
func serveLocal(t *testing.T, srv *Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Stop(ctx)
	})
	return lis.Addr().String()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

const (
	node1   = "i-00000001"
	node2   = "i-00000002"
	subnet1 = "subnet-0000000a"
	subnet2 = "subnet-0000000b"
)

func identity(id, subnet string) *allotv1.NodeIdentity {
	var n int
	_, _ = fmt.Sscanf(id, "i-%x", &n)
	return &allotv1.NodeIdentity{
		InstanceId:       id,
		InstanceType:     "m5.large",
		AvailabilityZone: "us-east-1a",
		VpcId:            "vpc-00000001",
		SubnetId:         subnet,
		PrimaryEniId:     fmt.Sprintf("eni-%08x", 0x1000+n),
		PrimaryMac:       fmt.Sprintf("02:00:00:00:10:%02x", n),
		PrimaryIp:        fmt.Sprintf("10.0.1.%d", n),
		SecurityGroupIds: []string{"sg-00000001"},
		VpcCidrs:         []string{"10.0.0.0/16"},
	}
}

func (e *env) register(t *testing.T, id, subnet string) *allotv1.RegisterResponse {
	t.Helper()
	resp, err := e.node.Register(ctxT(t), &allotv1.RegisterRequest{
		Node: identity(id, subnet), Mode: allotv1.AddressMode_ADDRESS_MODE_SECONDARY_IP,
		Warm: &allotv1.WarmTargets{WarmIpTarget: 5},
	})
	if err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	return resp
}

// subnet records a subnet as the engine would after DescribeSubnets.
func (e *env) subnet(t *testing.T, id, cidr string, usable int64) {
	t.Helper()
	if _, err := e.st.PutSubnet(ctxT(t), store.Subnet{ID: id, CIDR: cidr, AvailabilityZone: "us-east-1a",
		VPCID: "vpc-00000001", Usable: usable}); err != nil {
		t.Fatal(err)
	}
}

// limits records instance limits on a node, as the engine would.
func (e *env) limits(t *testing.T, id string, maxENIs, perENI int) {
	t.Helper()
	n, err := e.st.GetNode(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	n.MaxENIs, n.IPv4PerENI = maxENIs, perENI
	if _, err := e.st.PutNode(ctxT(t), n); err != nil {
		t.Fatal(err)
	}
}

// addENI creates and attaches a secondary ENI through intents, as the
// engine does after the EC2 calls succeed.
func (e *env) addENI(t *testing.T, instance, subnet, eniID string, dev int, addrs []string) {
	t.Helper()
	ctx := ctxT(t)
	in, err := e.st.BeginIntent(ctx, store.Intent{Kind: store.IntentCreate, InstanceID: instance, SubnetID: subnet,
		Count: len(addrs), Reserved: int64(1 + len(addrs))})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.CompleteCreate(ctx, in.ID, store.ENI{ID: eniID, InstanceID: instance, SubnetID: subnet,
		MAC: "02:00:00:00:20:" + eniID[len(eniID)-2:], PrimaryIP: addrs[0][:len(addrs[0])-1] + "0", Addresses: addrs}); err != nil {
		t.Fatal(err)
	}
	at, err := e.st.BeginIntent(ctx, store.Intent{Kind: store.IntentAttach, InstanceID: instance, ENIID: eniID, DeviceIndex: dev})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.CompleteAttach(ctx, at.ID, eniID, dev); err != nil {
		t.Fatal(err)
	}
}

// wantCode asserts a gRPC error's code and that its message mentions each
// of the given fragments.
func wantCode(t *testing.T, err error, code codes.Code, fragments ...string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code {
		t.Fatalf("got %v (%v), want code %v", st.Code(), err, code)
	}
	for _, f := range fragments {
		if !strings.Contains(st.Message(), f) {
			t.Fatalf("message %q does not mention %q", st.Message(), f)
		}
	}
}
