package reconciler_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/reconciler"
	"github.com/allotnet/allot/broker/store"
)

const (
	timeScale = 20
	cluster   = "test"
	subnetID  = "subnet-0aaaaaaaaaaaaaaaa"
	// grace between the two passes that must see a thing before it is acted on
	grace = 300 * time.Millisecond
)

type env struct {
	sim   *awssim.Sim
	st    *store.Store
	ec2   *ec2client.Client
	insts []world.Instance
	rec   *reconciler.Reconciler
}

func newEnv(t *testing.T, instances int) *env {
	t.Helper()
	sc := scenario.Scenario{
		VPCs: []scenario.VPC{{
			ID:    "vpc-0123456789abcdef0",
			CIDRs: []string{"10.0.0.0/16"},
			Subnets: []scenario.Subnet{
				{ID: subnetID, Name: "a", CIDR: "10.0.0.0/24", AZ: "us-east-1a"},
			},
		}},
		Instances: []scenario.Instance{{Subnet: "a", Type: "m5.large", Count: instances}},
	}
	sim, err := awssim.Start(context.Background(), awssim.Config{Scenario: sc, TimeScale: timeScale, AdminAddr: "off", Seed: 3})
	if err != nil {
		t.Fatalf("start awssim: %v", err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	st, err := store.Open(etcdembedtest.Start(t), cluster)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ec2client.New(context.Background(), ec2client.Config{
		Region: "us-east-1", Endpoint: sim.EC2Endpoint(), Logger: slog.New(slog.DiscardHandler),
		Limiter: ratelimit.New(ratelimit.Config{Share: 1, TimeScale: timeScale}),
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{sim: sim, st: st, ec2: ec, insts: sim.World().Instances()}
	e.rec = reconciler.New(reconciler.Config{Cluster: cluster, Store: st, EC2: ec, Grace: grace})
	ctx := ctxT(t)
	if _, err := st.PutSubnet(ctx, store.Subnet{ID: subnetID, CIDR: "10.0.0.0/24", AvailabilityZone: "us-east-1a", VPCID: "vpc-0123456789abcdef0", Usable: 251}); err != nil {
		t.Fatal(err)
	}
	for _, inst := range e.insts {
		p := inst.NetworkInterfaces[0]
		if _, err := st.PutNode(ctx, store.Node{InstanceID: inst.ID, InstanceType: inst.Type, SubnetID: subnetID, PrimaryENIID: p.ID, Mode: "secondary-ip"}); err != nil {
			t.Fatal(err)
		}
		if err := st.PutPrimaryENI(ctx, store.ENI{ID: p.ID, InstanceID: inst.ID, SubnetID: subnetID, MAC: p.MAC, PrimaryIP: p.PrivateIP}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// create makes an ENI in EC2 with the given tags and secondary addresses.
func (e *env) create(t *testing.T, tags map[string]string, secondary int) ec2client.ENIInfo {
	t.Helper()
	x, err := e.ec2.CreateENI(ctxT(t), ec2client.CreateENIInput{SubnetID: subnetID, SecondaryCount: secondary, Tags: tags})
	if err != nil {
		t.Fatalf("create ENI: %v", err)
	}
	return x
}

func ours(instance string) map[string]string {
	return ec2client.OwnerTags(cluster, instance, time.Now())
}

// attach attaches an ENI in EC2.
func (e *env) attach(t *testing.T, eniID, instance string, index int, deleteOnTermination bool) {
	t.Helper()
	att, err := e.ec2.AttachENI(ctxT(t), eniID, instance, index)
	if err != nil {
		t.Fatalf("attach %s: %v", eniID, err)
	}
	if deleteOnTermination {
		if err := e.ec2.SetDeleteOnTermination(ctxT(t), eniID, att, true); err != nil {
			t.Fatal(err)
		}
	}
}

// record writes an ENI's record through the intents the engine would have
// used, created an hour ago (older than any grace), attached at index if
// index > 0.
func (e *env) record(t *testing.T, x ec2client.ENIInfo, instance string, index int) {
	t.Helper()
	ctx := ctxT(t)
	in, err := e.st.BeginIntent(ctx, store.Intent{Kind: store.IntentCreate, InstanceID: instance, SubnetID: subnetID,
		Count: len(x.Addresses), Reserved: int64(1 + len(x.Addresses))})
	if err != nil {
		t.Fatal(err)
	}
	err = e.st.CompleteCreate(ctx, in.ID, store.ENI{ID: x.ID, InstanceID: instance, SubnetID: subnetID, MAC: x.MAC,
		PrimaryIP: x.PrimaryIP, Addresses: x.Addresses, DeviceIndex: index, CreatedAt: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if index == 0 {
		return
	}
	in, err = e.st.BeginIntent(ctx, store.Intent{Kind: store.IntentAttach, InstanceID: instance, ENIID: x.ID, SubnetID: subnetID, DeviceIndex: index})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.CompleteAttach(ctx, in.ID, x.ID, index); err != nil {
		t.Fatal(err)
	}
}

func (e *env) exists(id string) bool {
	_, ok := e.sim.World().NetworkInterface(id)
	return ok
}

func (e *env) pass(t *testing.T) reconciler.Report {
	t.Helper()
	rep, err := e.rec.Pass(ctxT(t))
	if err != nil {
		t.Fatalf("pass: %v", err)
	}
	return rep
}

// action returns what a report says was done about the finding of kind on
// id (an ENI or an instance), or "".
func action(rep reconciler.Report, kind, id string) string {
	for _, f := range rep.Findings {
		if f.Kind == kind && (f.ENIID == id || (f.ENIID == "" && f.InstanceID == id) || f.SubnetID == id && (f.Kind == reconciler.KindSubnetUse || f.Kind == reconciler.KindSubnetRecord)) {
			return f.Action
		}
	}
	return ""
}

// checkAccounts fails unless the subnet's Attached equals the weight of the
// ENI records in it and nothing is reserved.
func (e *env) checkAccounts(t *testing.T) {
	t.Helper()
	ctx := ctxT(t)
	sn, err := e.st.GetSubnet(ctx, subnetID)
	if err != nil {
		t.Fatal(err)
	}
	enis, err := e.st.ListENIs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var w int64
	for _, x := range enis {
		w += x.Weight()
	}
	if sn.Attached != w || sn.Reserved != 0 {
		t.Errorf("subnet: attached %d reserved %d; records weigh %d, nothing should be reserved", sn.Attached, sn.Reserved, w)
	}
}
