package burst

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/awssim/throttle"
)

// CloudConfig is the simulated account of one variant: Nodes instances of
// one type, spread over as many /16 subnets as their addresses need.
type CloudConfig struct {
	Nodes        int
	InstanceType string
	// Subnets is how many /16 subnets the nodes are spread over
	// (round-robin); at least 1.
	Subnets   int
	TimeScale float64
	Seed      int64
	// Semantics switches the bucket model (per-API or shared describe
	// buckets, continuous or per-second refill).
	Semantics throttle.Semantics
	// BucketScale scales every bucket's size and refill (0 or 1: EC2's
	// table), to make the broker's table wrong.
	BucketScale float64
	// Nice, when not 0, is the nice value of every thread of awssim's
	// child process (setNice), as BrokerConfig.Nice is the broker's.
	Nice   int
	Logger *slog.Logger
}

// Flags registers the config's flags on fs; Args is the matching command
// line ("allot-burst cloud ...").
func (c *CloudConfig) Flags(fs *flag.FlagSet) {
	fs.IntVar(&c.Nodes, "nodes", c.Nodes, "instances to launch")
	fs.StringVar(&c.InstanceType, "instance-type", c.InstanceType, "instance type")
	fs.IntVar(&c.Subnets, "subnets", c.Subnets, "/16 subnets to spread the instances over")
	fs.Float64Var(&c.TimeScale, "time-scale", c.TimeScale, "simulated seconds per real second")
	fs.Int64Var(&c.Seed, "seed", c.Seed, "seed for IDs and addresses")
	fs.BoolVar(&c.Semantics.SharedDescribe, "shared-describe", c.Semantics.SharedDescribe, "one describe bucket for every Describe action")
	fs.BoolVar(&c.Semantics.DiscreteRefill, "discrete-refill", c.Semantics.DiscreteRefill, "refill buckets once per simulated second")
	fs.Float64Var(&c.BucketScale, "bucket-scale", c.BucketScale, "scale every bucket's size and refill by this")
	fs.IntVar(&c.Nice, "nice", c.Nice, "nice value of awssim's threads (-20..19; 0: leave as started)")
}

// Args is the command line Flags parses back into c.
func (c CloudConfig) Args() []string {
	return []string{
		"--nodes", strconv.Itoa(c.Nodes), "--instance-type", c.InstanceType,
		"--subnets", strconv.Itoa(c.Subnets),
		"--time-scale", strconv.FormatFloat(c.TimeScale, 'g', -1, 64),
		"--seed", strconv.FormatInt(c.Seed, 10),
		"--shared-describe=" + strconv.FormatBool(c.Semantics.SharedDescribe),
		"--discrete-refill=" + strconv.FormatBool(c.Semantics.DiscreteRefill),
		"--bucket-scale", strconv.FormatFloat(c.BucketScale, 'g', -1, 64),
		"--nice", strconv.Itoa(c.Nice),
	}
}

// subnetName names the i-th subnet of the scenario.
func subnetName(i int) string { return fmt.Sprintf("nodes-%d", i) }

// Scenario builds the awssim account: one VPC with a /16 per subnet, the
// subnets spread over three AZs, the instances spread over the subnets,
// EC2's default buckets (scaled by BucketScale) under Semantics.
func (c CloudConfig) Scenario() scenario.Scenario {
	n := max(c.Subnets, 1)
	vpc := scenario.VPC{Tags: map[string]string{"Name": "allot-burst"}}
	var insts []scenario.Instance
	for i := range n {
		cidr := fmt.Sprintf("10.%d.0.0/16", i)
		vpc.CIDRs = append(vpc.CIDRs, cidr)
		az := "us-east-1" + string(rune('a'+i%3))
		vpc.Subnets = append(vpc.Subnets, scenario.Subnet{Name: subnetName(i), CIDR: cidr, AZ: az})
		count := c.Nodes / n
		if i < c.Nodes%n {
			count++
		}
		if count > 0 {
			insts = append(insts, scenario.Instance{Subnet: subnetName(i), Type: c.InstanceType, Count: count,
				Tags: map[string]string{"role": "node"}})
		}
	}
	th := scenario.Throttle{Semantics: c.Semantics}
	if c.BucketScale > 0 && c.BucketScale != 1 {
		th.Buckets = map[string]throttle.Spec{}
		for name, sp := range throttle.DefaultSpecs() {
			th.Buckets[name] = throttle.Spec{Capacity: max(1, sp.Capacity*c.BucketScale), Refill: sp.Refill * c.BucketScale}
		}
	}
	return scenario.Scenario{Region: "us-east-1", AccountID: "123456789012", VPCs: []scenario.VPC{vpc}, Instances: insts, Throttle: th}
}

// StartCloud starts awssim in this process.
func StartCloud(ctx context.Context, c CloudConfig) (*awssim.Sim, error) {
	return awssim.Start(ctx, awssim.Config{Scenario: c.Scenario(), TimeScale: c.TimeScale, Seed: c.Seed, Logger: c.Logger})
}

// ServeCloudChild runs awssim as the benchmark's child process: it writes a
// childHello line (EC2 and admin endpoints) to out and serves until ctx
// ends.
func ServeCloudChild(ctx context.Context, c CloudConfig, out *os.File) error {
	if err := setNice(c.Nice); err != nil {
		return err
	}
	sim, err := StartCloud(ctx, c)
	if err != nil {
		return err
	}
	defer sim.Close()
	hello := childHello{EC2: sim.EC2Endpoint(), Admin: sim.AdminEndpoint(), PID: os.Getpid()}
	if err := json.NewEncoder(out).Encode(hello); err != nil {
		return fmt.Errorf("write hello: %w", err)
	}
	<-ctx.Done()
	return nil
}
