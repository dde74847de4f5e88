package executor

import (
	"context"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/store"
)

// holdAttach is a Store that holds each attach intent's write until the
// test lets it go, having said it arrived.
type holdAttach struct {
	Store
	arrived, release chan struct{}
}

func (h *holdAttach) BeginIntent(ctx context.Context, in store.Intent) (store.Intent, error) {
	if in.Kind == store.IntentAttach {
		h.arrived <- struct{}{}
		select {
		case <-h.release:
		case <-ctx.Done():
			return store.Intent{}, ctx.Err()
		}
	}
	return h.Store.BeginIntent(ctx, in)
}

// TestAttachCountedUntilItAsks: a new ENI's Attach and Modify count against
// their buckets (what the planner balances the kinds of call with) until
// each is about to ask for its token, the time its intent takes to write
// included: during a burst that write waits behind others, and a planner
// that saw the Attach bucket's tokens as free then sent more nodes to new
// ENIs than the bucket could serve in time.
func TestAttachCountedUntilItAsks(t *testing.T) {
	const subnet = "subnet-0aaaaaaaaaaaaaaaa"
	sim, err := awssim.Start(context.Background(), awssim.Config{Scenario: scenario.Scenario{
		VPCs: []scenario.VPC{{ID: "vpc-0123456789abcdef0", CIDRs: []string{"10.0.0.0/16"},
			Subnets: []scenario.Subnet{{ID: subnet, Name: "a", CIDR: "10.0.0.0/17", AZ: "us-east-1a"}}}},
		Instances: []scenario.Instance{{Subnet: "a", Type: "c5.xlarge", Count: 1}},
	}, TimeScale: 20, AdminAddr: "off", Seed: 7})
	if err != nil {
		t.Fatalf("start awssim: %v", err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	lim := ratelimit.New(ratelimit.Config{Share: 1, TimeScale: 20, Adapt: true})
	ec, err := ec2client.New(context.Background(), ec2client.Config{Region: "us-east-1", Endpoint: sim.EC2Endpoint(), Limiter: lim})
	if err != nil {
		t.Fatalf("ec2 client: %v", err)
	}
	st, err := store.Open(etcdembedtest.Start(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := st.PutSubnet(ctx, store.Subnet{ID: subnet, Usable: 1000, Headroom: 10}); err != nil {
		t.Fatal(err)
	}
	inst := sim.World().Instances()[0]
	node := store.Node{InstanceID: inst.ID, InstanceType: "c5.xlarge", SubnetID: subnet, Mode: "prefix"}
	h := &holdAttach{Store: st, arrived: make(chan struct{}), release: make(chan struct{})}
	e := New(Config{Cluster: "test", Store: h, EC2: ec})
	rs := newRunState(func(error) {})
	attach, modify := ratelimit.ClassOf(planner.CallAttach, true), ratelimit.ClassOf(planner.CallModify, true)
	counted := func() (int, int) {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		return rs.notAsked(attach), rs.notAsked(modify)
	}

	later := rs.chain()
	if a, m := counted(); a != 1 || m != 1 {
		t.Fatalf("queued: %d Attach and %d Modify still to ask; want 1 and 1", a, m)
	}
	a := planner.Action{Kind: planner.CreateAttach, InstanceID: inst.ID, SubnetID: subnet, DeviceIndex: 1, Count: 1, Mode: planner.Prefix}
	done := make(chan error, 1)
	go func() { done <- e.createAttach(ctx, rs, a, node, func() {}, later) }()
	select {
	case <-h.arrived:
	case err := <-done:
		t.Fatalf("createAttach ended before its Attach's intent: %v", err)
	}
	if a, m := counted(); a != 1 || m != 1 {
		t.Errorf("Attach's intent being written: %d Attach and %d Modify still to ask; want 1 and 1", a, m)
	}
	close(h.release)
	if err := <-done; err != nil {
		t.Fatalf("createAttach: %v", err)
	}
	if a, m := counted(); a != 0 || m != 0 {
		t.Errorf("done: %d Attach and %d Modify still to ask; want 0 and 0", a, m)
	}
	later.attach()
	later.modify()
	if a, m := counted(); a != 0 || m != 0 {
		t.Errorf("taken off twice: %d Attach and %d Modify still to ask; want 0 and 0", a, m)
	}
}
