package harness

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/awssim/world"
)

// The simulated account: one VPC, one roomy subnet, one instance per test.
const (
	VPCID      = "vpc-0e2e0000000000001"
	SubnetID   = "subnet-0e2e0000000000001"
	InstanceID = "i-0e2e0000000000001"
	AZ         = "us-east-1a"
)

var (
	// VPCCIDR is the VPC's only CIDR.
	VPCCIDR = netip.MustParsePrefix("10.0.0.0/16")
	// SubnetCIDR is the node's subnet; every ENI is created in it.
	SubnetCIDR = netip.MustParsePrefix("10.0.0.0/20")
	// SubnetGateway is the VPC router's address in the subnet; the vpc
	// namespace holds it.
	SubnetGateway = netip.MustParseAddr("10.0.0.1")
)

// CloudConfig tunes the simulated AWS.
type CloudConfig struct {
	// InstanceType of the node (default c5.xlarge: 4 ENIs of 15 addresses,
	// so 50 pods spread over the primary and secondary ENIs).
	InstanceType string
	// TimeScale is simulated seconds per real second (default 100: IMDS
	// lags 10 ms, a detach takes 20 ms, token buckets refill 100x faster).
	TimeScale float64
}

// Cloud is awssim with the node's instance and a real SDK client on it.
type Cloud struct {
	Sim       *awssim.Sim
	EC2       *ec2.Client
	TimeScale float64
	Node      *Node
}

// StartCloud creates the node's namespaces and starts awssim with the
// instance launched, so the node sees its primary ENI attach.
func StartCloud(t testing.TB, cfg CloudConfig) *Cloud {
	t.Helper()
	if cfg.InstanceType == "" {
		cfg.InstanceType = "c5.xlarge"
	}
	if cfg.TimeScale == 0 {
		cfg.TimeScale = 100
	}
	node := NewNode(t, InstanceID, map[string]netip.Prefix{SubnetID: SubnetCIDR})
	sc := scenario.Scenario{
		Region: "us-east-1", AccountID: "123456789012",
		VPCs: []scenario.VPC{{
			ID: VPCID, CIDRs: []string{VPCCIDR.String()},
			Subnets: []scenario.Subnet{{ID: SubnetID, Name: "nodes", CIDR: SubnetCIDR.String(), AZ: AZ}},
		}},
		Instances: []scenario.Instance{{ID: InstanceID, Subnet: SubnetID, Type: cfg.InstanceType}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sim, err := awssim.Start(ctx, awssim.Config{Scenario: sc, TimeScale: cfg.TimeScale, Seed: 7, Hooks: node, AdminAddr: "off"})
	if err != nil {
		t.Fatalf("start awssim: %v", err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	if err := node.Err(); err != nil {
		t.Fatalf("node data plane: %v", err)
	}
	if !node.PrimaryIP().IsValid() {
		t.Fatal("the instance's primary ENI never attached to the node")
	}
	return &Cloud{Sim: sim, EC2: ec2.NewFromConfig(awssim.SDKConfig(sim.EC2Endpoint())), TimeScale: cfg.TimeScale, Node: node}
}

// IMDSEndpoint is the instance's metadata service URL.
func (c *Cloud) IMDSEndpoint(t testing.TB) string {
	t.Helper()
	u, err := c.Sim.IMDSEndpoint(InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Instance returns the node's instance as EC2 sees it now.
func (c *Cloud) Instance(t testing.TB) world.Instance {
	t.Helper()
	inst, ok := c.Sim.World().Instance(InstanceID)
	if !ok {
		t.Fatalf("instance %s is gone", InstanceID)
	}
	return inst
}

// ENIState is one ENI as EC2 or the broker has it: comparing it before and
// after a crash shows that nothing was unassigned, detached or deleted.
type ENIState struct {
	Status      string
	DeviceIndex int
	// Addresses are the secondary addresses and prefixes, sorted.
	Addresses []string
}

// Assigned is what EC2 holds for the node, by ENI ID: each attached ENI's
// status, device index and secondary addresses.
func (c *Cloud) Assigned(t testing.TB) map[string]ENIState {
	t.Helper()
	out := map[string]ENIState{}
	for _, e := range c.Sim.World().AllNetworkInterfaces() {
		if e.Attachment == nil || e.Attachment.InstanceID != InstanceID {
			continue
		}
		out[e.ID] = ENIState{Status: e.Status, DeviceIndex: e.Attachment.DeviceIndex,
			Addresses: sortedCopy(append(append([]string(nil), e.SecondaryIPs...), e.Prefixes...))}
	}
	return out
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// OwnerOf returns the attached ENI of the node that EC2 says holds addr as
// a secondary address (or inside a delegated prefix), and its device index.
func (c *Cloud) OwnerOf(addr netip.Addr) (eniID string, deviceIndex int, ok bool) {
	for _, e := range c.Sim.World().AllNetworkInterfaces() {
		if e.Attachment == nil || e.Attachment.InstanceID != InstanceID {
			continue
		}
		for _, s := range e.SecondaryIPs {
			if a, err := netip.ParseAddr(s); err == nil && a == addr {
				return e.ID, e.Attachment.DeviceIndex, true
			}
		}
		for _, s := range e.Prefixes {
			if p, err := netip.ParsePrefix(s); err == nil && p.Contains(addr) {
				return e.ID, e.Attachment.DeviceIndex, true
			}
		}
	}
	return "", 0, false
}
