package ec2client

import (
	"context"
	"testing"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/broker/ratelimit"
)

// Fixed IDs of the test account.
const (
	testSubnet   = "subnet-0a000001"
	testSubnetB  = "subnet-0a000002"
	testInstance = "i-0a0000000000000a1"
	testXen      = "i-0a0000000000000a2"
)

// testScenario is a small account: one VPC, two subnets, a Nitro and a Xen
// instance.
func testScenario() scenario.Scenario {
	return scenario.Scenario{
		Region: "us-east-1",
		VPCs: []scenario.VPC{{
			CIDRs: []string{"10.0.0.0/16"},
			Subnets: []scenario.Subnet{
				{ID: testSubnet, CIDR: "10.0.0.0/20", AZ: "us-east-1a"},
				{ID: testSubnetB, CIDR: "10.0.16.0/24", AZ: "us-east-1b"},
			},
		}},
		Instances: []scenario.Instance{
			{ID: testInstance, Subnet: testSubnet, Type: "c5.xlarge"},
			{ID: testXen, Subnet: testSubnetB, Type: "t2.medium"},
		},
	}
}

// startSim runs an awssim for the test. A time scale of 100 makes detach
// (2 simulated seconds) take 20 ms.
func startSim(t *testing.T, sc scenario.Scenario) *awssim.Sim {
	t.Helper()
	sim, err := awssim.Start(context.Background(), awssim.Config{Scenario: sc, TimeScale: 100, AdminAddr: "off", Seed: 1})
	if err != nil {
		t.Fatalf("start awssim: %v", err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	return sim
}

// newClient returns a client of sim. A nil limiter means a fast one (time
// scale 1000), so tests that drain a bucket don't wait long.
func newClient(t *testing.T, sim *awssim.Sim, lim *ratelimit.Limiter, retries int) *Client {
	t.Helper()
	if lim == nil {
		lim = ratelimit.New(ratelimit.Config{TimeScale: 1000})
	}
	c, err := New(context.Background(), Config{Region: "us-east-1", Endpoint: sim.EC2Endpoint(), Limiter: lim, MaxThrottleRetries: retries})
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return c
}

// checkCountersAgree asserts the client counted exactly the requests awssim
// received, action by action.
func checkCountersAgree(t *testing.T, c *Client, sim *awssim.Sim) {
	t.Helper()
	ours := c.Calls()
	theirs := sim.Counters()
	for action, n := range ours {
		if theirs[action].Calls != n {
			t.Errorf("%s: client counted %d calls, awssim %d", action, n, theirs[action].Calls)
		}
	}
	for action, ac := range theirs {
		if _, ok := ours[action]; !ok && ac.Calls > 0 {
			t.Errorf("%s: awssim saw %d calls the client did not count", action, ac.Calls)
		}
	}
}
