package awssim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/awssim/simclock"
)

// testScenario is a small account: one VPC, a roomy subnet in each of two
// AZs, a /27 that fills up quickly, and a few instances.
func testScenario() scenario.Scenario {
	return scenario.Scenario{
		VPCs: []scenario.VPC{{
			ID:             "vpc-0123456789abcdef0",
			CIDRs:          []string{"10.0.0.0/16"},
			SecurityGroups: []string{"sg-0123456789abcdef0"},
			Subnets: []scenario.Subnet{
				{ID: "subnet-0aaaaaaaaaaaaaaaa", Name: "a", CIDR: "10.0.0.0/24", AZ: "us-east-1a"},
				{ID: "subnet-0bbbbbbbbbbbbbbbb", Name: "b", CIDR: "10.0.1.0/24", AZ: "us-east-1b"},
				{ID: "subnet-0cccccccccccccccc", Name: "small", CIDR: "10.0.2.0/27", AZ: "us-east-1a"},
			},
		}},
		Instances: []scenario.Instance{
			{ID: "i-0000000000000c5a1", Subnet: "a", Type: "c5.xlarge"},
		},
	}
}

const (
	subnetA     = "subnet-0aaaaaaaaaaaaaaaa"
	subnetB     = "subnet-0bbbbbbbbbbbbbbbb"
	subnetSmall = "subnet-0cccccccccccccccc"
)

type harness struct {
	sim *awssim.Sim
	ec2 *ec2.Client
	ctx context.Context
}

// start runs a Sim for the test. Unless the config says otherwise, time
// runs 1000x (detach 2 s simulated = 2 ms real) and throttling is off, so
// functional tests don't trip buckets; throttling tests turn it on.
func start(t *testing.T, cfg awssim.Config) *harness {
	t.Helper()
	if cfg.TimeScale == 0 {
		cfg.TimeScale = 1000
	}
	if cfg.Seed == 0 {
		cfg.Seed = 42
	}
	sim, err := awssim.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start awssim: %v", err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return &harness{sim: sim, ec2: ec2.NewFromConfig(awssim.SDKConfig(sim.EC2Endpoint())), ctx: ctx}
}

// startDefault starts testScenario with throttling off.
func startDefault(t *testing.T) *harness {
	sc := testScenario()
	sc.Throttle.Disabled = true
	return start(t, awssim.Config{Scenario: sc})
}

// apiErr asserts err is an EC2 API error with the code (and, if msg is not
// empty, exactly that message).
func apiErr(t *testing.T, err error, code, msg string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error = %v; want API error %s", err, code)
	}
	if ae.ErrorCode() != code {
		t.Fatalf("error code = %s (%s); want %s", ae.ErrorCode(), ae.ErrorMessage(), code)
	}
	if msg != "" && ae.ErrorMessage() != msg {
		t.Fatalf("error message = %q; want %q", ae.ErrorMessage(), msg)
	}
}

// available returns a subnet's available address count via DescribeSubnets.
func (h *harness) available(t *testing.T, subnetID string) int {
	t.Helper()
	out, err := h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{subnetID}})
	if err != nil {
		t.Fatalf("DescribeSubnets: %v", err)
	}
	if len(out.Subnets) != 1 {
		t.Fatalf("DescribeSubnets(%s) returned %d subnets", subnetID, len(out.Subnets))
	}
	return int(*out.Subnets[0].AvailableIpAddressCount)
}

// waitSim waits d of simulated time.
func (h *harness) waitSim(d time.Duration) {
	_ = simclock.Sleep(h.ctx, h.sim.Clock(), d)
}
