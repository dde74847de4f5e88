package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/broker/auth"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// mutating are the EC2 actions that change something.
var mutating = []string{
	"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute",
	"AssignPrivateIpAddresses", "UnassignPrivateIpAddresses", "DetachNetworkInterface",
	"DeleteNetworkInterface", "CreateTags",
}

// attackEnv is allot-broker with TLS and attestation on, against awssim
// with three instances in us-east-1a and a subnet in us-east-1b; instance C
// runs an honest agent (attested) holding addresses.
type attackEnv struct {
	sim        *awssim.Sim
	sec        *secure
	p          *proc
	a, b, c    world.Instance
	otherZone  string
	honestC    allotv1.NodeServiceClient
	cAddresses []string
}

func startAttackEnv(t *testing.T) *attackEnv {
	t.Helper()
	sim, err := awssim.Start(context.Background(), awssim.Config{TimeScale: 10, Seed: 7, Scenario: scenario.Scenario{
		VPCs: []scenario.VPC{{CIDRs: []string{"10.0.0.0/16"}, Subnets: []scenario.Subnet{
			{Name: "a", CIDR: "10.0.0.0/24", AZ: "us-east-1a"},
			{Name: "b", CIDR: "10.0.1.0/24", AZ: "us-east-1b"},
		}}},
		Instances: []scenario.Instance{{Subnet: "a", Type: "m5.large", Count: 3}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	e := &attackEnv{sim: sim, sec: newSecure(t, sim)}
	insts := sim.World().Instances()
	e.a, e.b, e.c = insts[0], insts[1], insts[2]
	for _, sn := range sim.World().Subnets() {
		if sn.AvailabilityZone == "us-east-1b" {
			e.otherZone = sn.ID
		}
	}
	e.p = startBroker(t, append(e.sec.args(t), "--data-dir", filepath.Join(t.TempDir(), "etcd"), "--name", "solo",
		"--ec2-endpoint", sim.EC2Endpoint(), "--time-scale", "10")...)

	// C is an honest node with pods on 4 addresses.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e.honestC = allotv1.NewNodeServiceClient(e.sec.node(t, e.p, e.c.ID))
	if _, err := e.honestC.Register(ctx, &allotv1.RegisterRequest{Node: identityOf(e.c)}); err != nil {
		t.Fatal(err)
	}
	w, err := e.honestC.WatchNode(ctx, &allotv1.WatchNodeRequest{InstanceId: e.c.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.honestC.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: e.c.ID, Pending: 4}); err != nil {
		t.Fatal(err)
	}
	for len(e.cAddresses) < 4 {
		ev, err := w.Recv()
		if err != nil {
			t.Fatalf("C's watch: %v", err)
		}
		e.cAddresses = nil
		for _, eni := range ev.GetEnis() {
			e.cAddresses = append(e.cAddresses, eni.GetAddresses()...)
		}
	}
	if _, err := e.honestC.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: e.c.ID, Seq: 1, Assigned: e.cAddresses}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.honestC.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: e.c.ID}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // let C's calls finish before counting
	return e
}

// quiet resets awssim's counters, runs attack, waits for the engine to have
// acted on anything it accepted (several gather periods), and fails if EC2
// saw a mutating call.
func (e *attackEnv) quiet(t *testing.T, attack func()) {
	t.Helper()
	e.sim.ResetCounters()
	attack()
	time.Sleep(3 * time.Second)
	for _, a := range mutating {
		if n := e.sim.Counters()[a].Calls; n != 0 {
			t.Errorf("%s: %d calls after the attempt, want 0", a, n)
		}
	}
}

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
}

func ctx30(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestAttacks replays, against the built broker with TLS and attestation
// on, each attempt that once made it call EC2 for someone else: each is
// refused with the right code, and EC2 sees no mutating call from it.
func TestAttacks(t *testing.T) {
	e := startAttackEnv(t)

	t.Run("no credentials: Register and SetDemand for an instance without an agent", func(t *testing.T) {
		e.quiet(t, func() {
			ctx := ctx30(t)
			// Plaintext does not even reach gRPC on a TLS port.
			plain, err := grpc.NewClient(e.p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close()
			_, err = allotv1.NewNodeServiceClient(plain).Register(ctx, &allotv1.RegisterRequest{Node: identityOf(e.b)})
			wantCode(t, "plaintext Register", err, codes.Unavailable)
			// TLS without a credential is Unauthenticated.
			node := allotv1.NewNodeServiceClient(e.sec.dial(t, e.p, ""))
			_, err = node.Register(ctx, &allotv1.RegisterRequest{Node: identityOf(e.b)})
			wantCode(t, "TLS Register", err, codes.Unauthenticated)
			_, err = node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: e.b.ID, Pending: 40})
			wantCode(t, "TLS SetDemand", err, codes.Unauthenticated)
		})
	})

	t.Run("node A's certificate acting for node B", func(t *testing.T) {
		e.quiet(t, func() {
			ctx := ctx30(t)
			for name, conn := range map[string]*grpc.ClientConn{
				"certificate": e.sec.dial(t, e.p, auth.RoleURI(auth.RoleNode, e.a.ID)),
				"attested":    e.sec.node(t, e.p, e.a.ID),
			} {
				node := allotv1.NewNodeServiceClient(conn)
				_, err := node.Register(ctx, &allotv1.RegisterRequest{Node: identityOf(e.b)})
				wantCode(t, name+" Register B", err, codes.PermissionDenied)
				_, err = node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: e.b.ID, Pending: 3})
				wantCode(t, name+" SetDemand B", err, codes.PermissionDenied)
				_, err = node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: e.b.ID, Seq: 9})
				wantCode(t, name+" ReportUsage B", err, codes.PermissionDenied)
			}
		})
	})

	t.Run("node A re-registers C, reports C's addresses free, acks a release", func(t *testing.T) {
		e.quiet(t, func() {
			ctx := ctx30(t)
			node := allotv1.NewNodeServiceClient(e.sec.node(t, e.p, e.a.ID))
			_, err := node.Register(ctx, &allotv1.RegisterRequest{Node: identityOf(e.c), Warm: &allotv1.WarmTargets{WarmIpTarget: 1}})
			wantCode(t, "Register C", err, codes.PermissionDenied)
			_, err = node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: e.c.ID, Seq: 100, Free: e.cAddresses})
			wantCode(t, "ReportUsage C", err, codes.PermissionDenied)
			_, err = node.AckRelease(ctx, &allotv1.AckReleaseRequest{InstanceId: e.c.ID, ReleaseId: "rel-0000000000000001", Addresses: e.cAddresses})
			wantCode(t, "AckRelease C", err, codes.PermissionDenied)
		})
	})

	t.Run("a planner sets a budget and states demand", func(t *testing.T) {
		e.quiet(t, func() {
			ctx := ctx30(t)
			for name, conn := range map[string]*grpc.ClientConn{
				"planner":          e.sec.dial(t, e.p, auth.RoleURI(auth.RolePlanner, "")),
				"CN planner alone": e.sec.dial(t, e.p, ""),
			} {
				_, err := allotv1.NewBudgetServiceClient(conn).SetSubnetBudget(ctx, &allotv1.SetSubnetBudgetRequest{SubnetId: e.a.SubnetID, Cap: 1})
				if name == "planner" {
					wantCode(t, name+" SetSubnetBudget", err, codes.PermissionDenied)
				} else if status.Code(err) != codes.Unauthenticated && status.Code(err) != codes.PermissionDenied {
					t.Errorf("%s SetSubnetBudget: %v", name, err)
				}
				_, err = allotv1.NewNodeServiceClient(conn).SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: e.a.ID, Pending: 5})
				if status.Code(err) != codes.PermissionDenied && status.Code(err) != codes.Unauthenticated {
					t.Errorf("%s SetDemand: %v", name, err)
				}
			}
			b, err := allotv1.NewBudgetServiceClient(e.sec.admin(t, e.p)).GetSubnetBudget(ctx, &allotv1.GetSubnetBudgetRequest{SubnetId: e.a.SubnetID})
			if err == nil && b.GetCap() != 0 {
				t.Errorf("subnet cap is now %d", b.GetCap())
			}
		})
	})

	t.Run("Register naming another instance's primary ENI", func(t *testing.T) {
		e.quiet(t, func() {
			ctx := ctx30(t)
			node := allotv1.NewNodeServiceClient(e.sec.node(t, e.p, e.a.ID))
			id := identityOf(e.a)
			id.PrimaryEniId = e.b.NetworkInterfaces[0].ID
			_, err := node.Register(ctx, &allotv1.RegisterRequest{Node: id})
			wantCode(t, "Register", err, codes.InvalidArgument)
			if err != nil && !strings.Contains(err.Error(), e.b.NetworkInterfaces[0].ID) {
				t.Errorf("the refusal does not name the claimed ENI: %v", err)
			}
			_, err = node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: e.a.ID, Pending: 3})
			if err != nil {
				t.Logf("SetDemand after the refused registration: %v", err)
			}
		})
	})

	t.Run("Register naming a subnet in another zone", func(t *testing.T) {
		e.quiet(t, func() {
			ctx := ctx30(t)
			node := allotv1.NewNodeServiceClient(e.sec.node(t, e.p, e.b.ID))
			id := identityOf(e.b)
			id.SubnetId = e.otherZone
			_, err := node.Register(ctx, &allotv1.RegisterRequest{Node: id})
			wantCode(t, "Register", err, codes.InvalidArgument)
			if err != nil && !strings.Contains(err.Error(), e.otherZone) {
				t.Errorf("the refusal does not name the claimed subnet: %v", err)
			}
			_, _ = node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: e.b.ID, Pending: 3})
		})
	})

	t.Run("ReportUsage with seq 2^64-1 for another node", func(t *testing.T) {
		e.quiet(t, func() {
			ctx := ctx30(t)
			node := allotv1.NewNodeServiceClient(e.sec.node(t, e.p, e.a.ID))
			_, err := node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: e.c.ID, Seq: math.MaxUint64})
			wantCode(t, "ReportUsage", err, codes.PermissionDenied)
		})
	})

	t.Run("a node's own ReportUsage with seq 2^64-1 then an honest report", func(t *testing.T) {
		e.quiet(t, func() {
			ctx := ctx30(t)
			_, err := e.honestC.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: e.c.ID, Seq: math.MaxUint64, Free: e.cAddresses})
			wantCode(t, "ReportUsage seq 2^64-1", err, codes.InvalidArgument)
			// The next honest report still counts.
			_, err = e.honestC.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: e.c.ID, Seq: 2,
				Assigned: e.cAddresses[:2], Free: e.cAddresses[2:]})
			if err != nil {
				t.Fatalf("the honest report after it: %v", err)
			}
			nodes, err := allotv1.NewAdminServiceClient(e.sec.admin(t, e.p)).ListNodes(ctx, &allotv1.ListNodesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range nodes.GetNodes() {
				if n.GetInstanceId() == e.c.ID && n.GetAssigned() != 2 {
					t.Errorf("C's assigned = %d after its honest report, want 2 (the poisoned seq was recorded?)", n.GetAssigned())
				}
			}
		})
	})

	t.Run("an ID of 1 MB", func(t *testing.T) {
		huge := "i-" + strings.Repeat("f", 1_000_000)
		before := len(e.p.logText())
		e.quiet(t, func() {
			ctx := ctx30(t)
			for name, conn := range map[string]*grpc.ClientConn{
				"anonymous": e.sec.dial(t, e.p, ""),
				"node A":    e.sec.node(t, e.p, e.a.ID),
				"admin":     e.sec.admin(t, e.p),
			} {
				_, err := allotv1.NewNodeServiceClient(conn).Heartbeat(ctx, &allotv1.HeartbeatRequest{InstanceId: huge})
				if c := status.Code(err); c != codes.Unauthenticated && c != codes.PermissionDenied {
					t.Errorf("%s Heartbeat: %v", name, c)
				}
				if len(fmt.Sprint(err)) > 512 {
					t.Errorf("%s: error of %d bytes", name, len(fmt.Sprint(err)))
				}
				_, err = allotv1.NewAdminServiceClient(conn).ListENIs(ctx, &allotv1.ListENIsRequest{InstanceId: huge})
				if len(fmt.Sprint(err)) > 512 {
					t.Errorf("%s ListENIs: error of %d bytes", name, len(fmt.Sprint(err)))
				}
			}
		})
		time.Sleep(500 * time.Millisecond)
		lines := 0
		for _, line := range strings.Split(e.p.logText()[before:], "\n") {
			if !strings.Contains(line, "i-ffff") {
				continue
			}
			lines++
			if len(line) >= 1024 {
				t.Errorf("a log line of %d bytes about a call with a 1 MB ID: %.300s", len(line), line)
			}
		}
		if lines == 0 {
			t.Error("no log line names the refused calls")
		}
	})
}
