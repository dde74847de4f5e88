package instanceview

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/ratelimit"
)

const inst = "i-0a0000000000000a1"

func startSim(t *testing.T, extra ...scenario.Instance) (*awssim.Sim, *ec2client.Client) {
	t.Helper()
	sim, err := awssim.Start(context.Background(), awssim.Config{Scenario: scenario.Scenario{
		Region: "us-east-1", AccountID: "123456789012",
		VPCs: []scenario.VPC{{ID: "vpc-0a000001", CIDRs: []string{"10.0.0.0/16"}, Subnets: []scenario.Subnet{
			{ID: "subnet-0a000001", CIDR: "10.0.0.0/20", AZ: "us-east-1a"},
		}}},
		Instances: append([]scenario.Instance{{ID: inst, Subnet: "subnet-0a000001", Type: "c5.xlarge"}}, extra...),
	}, TimeScale: 100, AdminAddr: "off", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	c, err := ec2client.New(context.Background(), ec2client.Config{
		Region: "us-east-1", Endpoint: sim.EC2Endpoint(), Limiter: ratelimit.New(ratelimit.Config{TimeScale: 1000}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return sim, c
}

// TestCacheAsksEC2OncePerTTL: answers come from EC2 (account, VPC, primary
// interface), repeated and concurrent Gets cost one DescribeInstances, an
// answer older than the TTL is asked again, and an unknown instance is
// ErrNotFound every time.
func TestCacheAsksEC2OncePerTTL(t *testing.T) {
	sim, ec2c := startSim(t)
	var now atomic.Int64
	now.Store(time.Unix(1_800_000_000, 0).UnixNano())
	c := New(ec2c, time.Minute, func() time.Time { return time.Unix(0, now.Load()) })
	ctx := context.Background()

	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Get(ctx, inst)
			if err == nil && (got.OwnerID != "123456789012" || got.VPCID != "vpc-0a000001" || got.PrimaryENI == "" ||
				got.AZ != "us-east-1a" || got.Type != "c5.xlarge" || got.SubnetID != "subnet-0a000001") {
				err = errors.New("wrong answer")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	described := func() int64 { return sim.Counters()["DescribeInstances"].Calls }
	if n := described(); n != 1 || c.Calls() != 1 {
		t.Fatalf("20 concurrent Gets: awssim saw %d DescribeInstances, cache counted %d; want 1", n, c.Calls())
	}
	now.Add(int64(59 * time.Second))
	if _, err := c.Get(ctx, inst); err != nil || described() != 1 {
		t.Fatalf("within the TTL: %v, %d calls", err, described())
	}
	now.Add(int64(2 * time.Second))
	if _, err := c.Get(ctx, inst); err != nil || described() != 2 {
		t.Fatalf("past the TTL: %v, %d calls; want a refresh", err, described())
	}
	for i := range 2 {
		if _, err := c.Get(ctx, "i-0fffffffffffffff0"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown instance, try %d: %v", i, err)
		}
	}
	if described() != 4 {
		t.Fatalf("misses must not be cached: %d calls, want 4", described())
	}
	c.Forget(inst)
	if _, err := c.Get(ctx, inst); err != nil || described() != 5 {
		t.Fatalf("after Forget: %v, %d calls", err, described())
	}
}

// TestCacheBatchesAFleet: a fleet registering at once shares one
// DescribeInstances.
func TestCacheBatchesAFleet(t *testing.T) {
	sim, ec2c := startSim(t, scenario.Instance{Subnet: "subnet-0a000001", Type: "m5.large", Count: 60})
	c := New(ec2c, 0, nil)
	var wg sync.WaitGroup
	insts := sim.World().Instances()
	for _, in := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Get(context.Background(), in.ID)
			if err != nil || got.ID != in.ID || got.Type != in.Type {
				t.Errorf("%s: %+v, %v", in.ID, got, err)
			}
		}()
	}
	wg.Wait()
	if n := sim.Counters()["DescribeInstances"].Calls; len(insts) != 61 || n > 2+int64(len(insts)) {
		t.Fatalf("%d instances cost %d DescribeInstances calls, want 1 or 2 (plus one per instance if the batched answer failed)", len(insts), n)
	}
}
