package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/broker/brokerd"
	"github.com/allotnet/allot/broker/clock"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const (
	e2eCluster = "e2e"
	e2eSubnet  = "subnet-0e2e0000000000001"
	e2eScale   = 10 // awssim and the broker's limiter run 10x faster
)

// broker is the broker in-process, assembled as allot-broker assembles it
// (brokerd): etcd, store, an elector running the engine, the gRPC server.
type broker struct {
	st   *store.Store
	ec2c *ec2client.Client
	addr string
}

func startBroker(t *testing.T, sim *awssim.Sim) *broker {
	t.Helper()
	simClock, err := clock.Scaled(e2eScale)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b, err := brokerd.New(ctx, brokerd.Config{
		Name: "broker-e2e", Cluster: e2eCluster, Listen: "127.0.0.1:0",
		Etcd:  brokerd.EtcdConfig{Client: etcdembedtest.Start(t)},
		EC2:   brokerd.EC2Config{Endpoint: sim.EC2Endpoint(), BucketShare: 0.5},
		Clock: simClock,
		// A 200 ms interval on the wall clock; the other timers run at
		// their defaults on the simulation's clock.
		Engine:       executor.Config{Interval: 200 * time.Millisecond * e2eScale},
		NoReconciler: true,
		ElectionTTL:  5 * time.Second,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		b.Close()
	})
	return &broker{st: b.Store(), ec2c: b.EC2(), addr: b.Addr()}
}

// agent is a fake node agent: it registers, states its demand, waits on
// WatchNode for the addresses, then reports them as pods and warm pool.
type agent struct {
	inst          world.Instance
	node          allotv1.NodeServiceClient
	pending, warm int
}

func (a *agent) identity() *allotv1.NodeIdentity {
	prim := a.inst.NetworkInterfaces[0]
	return &allotv1.NodeIdentity{
		InstanceId: a.inst.ID, InstanceType: a.inst.Type, AvailabilityZone: a.inst.AvailabilityZone,
		VpcId: a.inst.VPCID, SubnetId: a.inst.SubnetID, PrimaryEniId: prim.ID, PrimaryMac: prim.MAC,
		PrimaryIp: prim.PrivateIP, SecurityGroupIds: prim.SecurityGroups, VpcCidrs: []string{"10.0.0.0/16"},
	}
}

func (a *agent) run(ctx context.Context) error {
	id := a.inst.ID
	if _, err := a.node.Register(ctx, &allotv1.RegisterRequest{Node: a.identity(),
		Mode: allotv1.AddressMode_ADDRESS_MODE_SECONDARY_IP, Warm: &allotv1.WarmTargets{WarmIpTarget: int32(a.warm)}}); err != nil {
		return fmt.Errorf("%s: register: %w", id, err)
	}
	watch, err := a.node.WatchNode(ctx, &allotv1.WatchNodeRequest{InstanceId: id})
	if err != nil {
		return err
	}
	if _, err := a.node.Heartbeat(ctx, &allotv1.HeartbeatRequest{InstanceId: id}); err != nil {
		return fmt.Errorf("%s: heartbeat: %w", id, err)
	}
	if _, err := a.node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: id, Pending: int32(a.pending),
		WarmShortfall: int32(a.warm)}); err != nil {
		return fmt.Errorf("%s: demand: %w", id, err)
	}
	want := a.pending + a.warm
	var got []string
	for len(got) < want {
		ev, err := watch.Recv()
		if err != nil {
			return fmt.Errorf("%s: watch (have %d of %d addresses): %w", id, len(got), want, err)
		}
		got = got[:0]
		for _, e := range ev.GetEnis() {
			got = append(got, e.GetAddresses()...)
		}
	}
	if _, err := a.node.ReportUsage(ctx, &allotv1.ReportUsageRequest{InstanceId: id, Seq: 1,
		Assigned: got[:a.pending], Free: got[a.pending:]}); err != nil {
		return fmt.Errorf("%s: report: %w", id, err)
	}
	if _, err := a.node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: id}); err != nil {
		return fmt.Errorf("%s: demand: %w", id, err)
	}
	return nil
}

// TestEndToEndBurstThenAllotctlBudgets drives a burst of demands from fake
// agents over gRPC through the real engine against awssim, then checks
// `allotctl budgets -o json` against awssim's own subnet count.
func TestEndToEndBurstThenAllotctlBudgets(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds allotctl and runs a burst")
	}
	const nodes, pending, warm = 20, 8, 6
	sc := scenario.Scenario{
		VPCs: []scenario.VPC{{
			ID: "vpc-0e2e0000000000001", CIDRs: []string{"10.0.0.0/16"},
			Subnets: []scenario.Subnet{{ID: e2eSubnet, Name: "a", CIDR: "10.0.0.0/22", AZ: "us-east-1a"}},
		}},
		Instances: []scenario.Instance{{Subnet: "a", Type: "m5.large", Count: nodes}},
	}
	sim, err := awssim.Start(context.Background(), awssim.Config{Scenario: sc, TimeScale: e2eScale, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	b := startBroker(t, sim)

	conn, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	insts := sim.World().Instances()
	if len(insts) != nodes {
		t.Fatalf("awssim has %d instances, want %d", len(insts), nodes)
	}
	var wg sync.WaitGroup
	errs := make(chan error, nodes)
	for _, inst := range insts {
		a := &agent{inst: inst, node: allotv1.NewNodeServiceClient(conn), pending: pending, warm: warm}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.run(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Let the engine settle: no EC2 call in flight.
	admin := allotv1.NewAdminServiceClient(conn)
	for {
		st, err := admin.GetStatus(ctx, &allotv1.GetStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if st.GetOpenIntents() == 0 {
			if st.GetLeader() != "broker-e2e" || st.GetNodes() != nodes || st.GetAssigned() != nodes*pending {
				t.Fatalf("status %v", st)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("intents still open: %v", st)
		case <-time.After(50 * time.Millisecond):
		}
	}

	for action, c := range sim.Counters() {
		if c.Throttled != 0 {
			t.Errorf("awssim throttled %d %s calls", c.Throttled, action)
		}
	}

	// allotctl, built and run as an operator would.
	bin := filepath.Join(t.TempDir(), "allotctl")
	build := exec.Command("go", "build", "-o", bin, "github.com/allotnet/allot/broker/cmd/allotctl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build allotctl: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, bin, "--broker", b.addr, "budgets", "-o", "json").Output()
	if err != nil {
		t.Fatalf("allotctl budgets: %v", err)
	}
	var rows []struct {
		SubnetID     string `json:"subnet_id"`
		Usable       int64  `json:"usable"`
		Attached     int64  `json:"attached"`
		Assigned     int64  `json:"assigned"`
		Warm         int64  `json:"warm"`
		Reserved     int64  `json:"reserved"`
		UsedByOthers int64  `json:"used_by_others"`
		Available    int64  `json:"available"`
	}
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("allotctl output %s: %v", out, err)
	}
	if len(rows) != 1 || rows[0].SubnetID != e2eSubnet {
		t.Fatalf("budgets %s", out)
	}
	got := rows[0]

	// awssim's own count, through the SDK.
	api := ec2.NewFromConfig(awssim.SDKConfig(sim.EC2Endpoint()))
	ds, err := api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{e2eSubnet}})
	if err != nil {
		t.Fatal(err)
	}
	simAvailable := int64(aws.ToInt32(ds.Subnets[0].AvailableIpAddressCount))
	simInUse := 1024 - 5 - simAvailable
	// What awssim holds for the cluster: ENIs the broker created (primary
	// address and secondaries) and secondaries on the nodes' primary ENIs.
	var simOurs int64
	for _, e := range sim.World().AllNetworkInterfaces() {
		if e.SubnetID != e2eSubnet {
			continue
		}
		switch {
		case e.Tags[ec2client.TagCluster] == e2eCluster:
			simOurs += 1 + int64(len(e.SecondaryIPs)) + 16*int64(len(e.Prefixes))
		case e.RequesterManaged:
			simOurs += int64(len(e.SecondaryIPs)) + 16*int64(len(e.Prefixes))
		}
	}

	if got.Usable != 1019 || got.Reserved != 0 {
		t.Errorf("usable %d reserved %d, want 1019 and 0", got.Usable, got.Reserved)
	}
	if got.Attached != simOurs {
		t.Errorf("allotctl attached %d, awssim holds %d addresses on the cluster's ENIs", got.Attached, simOurs)
	}
	if got.Attached+got.UsedByOthers != simInUse {
		t.Errorf("allotctl attached %d + used by others %d != awssim in use %d (usable 1019 - available %d)",
			got.Attached, got.UsedByOthers, simInUse, simAvailable)
	}
	if got.UsedByOthers != nodes {
		t.Errorf("used by others %d, want the %d instances' primary addresses", got.UsedByOthers, nodes)
	}
	if got.Assigned != nodes*pending || got.Warm != nodes*warm {
		t.Errorf("assigned %d warm %d, want %d and %d", got.Assigned, got.Warm, nodes*pending, nodes*warm)
	}
	if got.Available != 1019-got.Attached-got.UsedByOthers {
		t.Errorf("available %d with attached %d and others %d", got.Available, got.Attached, got.UsedByOthers)
	}
	t.Logf("burst: %d nodes × %d addresses; EC2 calls %v; budget %+v", nodes, pending+warm, b.ec2c.Calls(), got)
}
