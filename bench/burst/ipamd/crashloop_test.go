package ipamd

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
)

func TestCrashLoopDelay(t *testing.T) {
	for n, want := range map[int]time.Duration{
		1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 5: 160 * time.Second,
		6: 5 * time.Minute, 7: 5 * time.Minute, 40: 5 * time.Minute,
	} {
		if got := CrashLoopDelay(n); got != want {
			t.Errorf("CrashLoopDelay(%d) = %s, want %s", n, got, want)
		}
	}
}

// TestStartSupervised makes nodeInit's DescribeNetworkInterfaces fail with
// RequestLimitExceeded on every attempt until the node has been restarted
// twice: the node must come up, after two restarts and their back-off
// (10 s + 20 s simulated), with its primary ENI in the datastore.
func TestStartSupervised(t *testing.T) {
	const scale = 100
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sim, err := awssim.Start(ctx, awssim.Config{TimeScale: scale, Seed: 1, Scenario: scenario.Scenario{
		Region: "us-east-1", AccountID: "123456789012",
		VPCs:      []scenario.VPC{{CIDRs: []string{"10.0.0.0/16"}, Subnets: []scenario.Subnet{{Name: "a", CIDR: "10.0.0.0/16", AZ: "us-east-1a"}}}},
		Instances: []scenario.Instance{{Subnet: "a", Type: "c5.xlarge"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	insts := sim.World().Instances()
	imdsURL, err := sim.IMDSEndpoint(insts[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	throttled := map[string]awssim.Fault{"DescribeNetworkInterfaces": {ErrorRate: 1, ErrorCode: "RequestLimitExceeded"}}
	sim.SetFaults(throttled)
	n, err := New(Config{InstanceID: insts[0].ID, IMDSEndpoint: imdsURL, EC2Endpoint: sim.EC2Endpoint(),
		MaxENIs: 4, IPv4PerENI: 15, TimeScale: scale, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	var failures atomic.Int32
	start := time.Now()
	restarts, err := n.StartSupervised(ctx, func(err error) {
		if !strings.Contains(err.Error(), "RequestLimitExceeded") {
			t.Errorf("restart for %v, want the throttled describe", err)
		}
		if failures.Add(1) == 2 {
			sim.SetFaults(nil)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if restarts != 2 {
		t.Errorf("%d restarts, want 2", restarts)
	}
	if waited := time.Since(start); waited < (30*time.Second)/scale {
		t.Errorf("came up after %s wall, before the 30 s simulated back-off", waited)
	}
	if s := n.ds.stats(); s.enis != 1 {
		t.Errorf("datastore %+v after start, want the primary ENI", s)
	}
}
