// Package scenario describes a simulated account in a YAML or JSON file:
// VPCs and subnets, extra instance types, instances, timing, throttling and
// faults. awssim loads one at start; the admin endpoint changes it later.
package scenario

import (
	_ "embed"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/allotnet/allot/awssim/simclock"
	"github.com/allotnet/allot/awssim/throttle"
)

// Scenario is the whole simulated account.
type Scenario struct {
	Region    string `json:"region,omitempty"`
	AccountID string `json:"accountId,omitempty"`
	Timing    Timing `json:"timing,omitzero"`
	VPCs      []VPC  `json:"vpcs"`
	// InstanceTypes are added to the built-in catalog (or replace an entry
	// of the same name).
	InstanceTypes []InstanceType `json:"instanceTypes,omitempty"`
	Instances     []Instance     `json:"instances,omitempty"`
	Throttle      Throttle       `json:"throttle,omitzero"`
	// Faults by action name; "*" applies to every action without an entry.
	Faults map[string]Fault `json:"faults,omitempty"`
	IMDS   IMDS             `json:"imds,omitzero"`
}

// Timing holds the simulated delays; an unset field takes its default.
type Timing struct {
	// IMDSLag is how long after EC2 applies a change IMDS shows it (default 1s).
	IMDSLag *simclock.Duration `json:"imdsLag,omitempty"`
	// DetachDelay is how long an ENI stays "detaching" (default 2s).
	DetachDelay *simclock.Duration `json:"detachDelay,omitempty"`
	// ConsistencyWindow hides new ENIs from DescribeNetworkInterfaces (default 0).
	ConsistencyWindow *simclock.Duration `json:"consistencyWindow,omitempty"`
}

// VPC is one VPC with its subnets.
type VPC struct {
	// ID is generated when empty; otherwise vpc- and 8 or 17 hex digits.
	ID                   string   `json:"id,omitempty"`
	CIDRs                []string `json:"cidrs"`
	DefaultSecurityGroup string   `json:"defaultSecurityGroup,omitempty"`
	// SecurityGroups are the VPC's other groups (sg- and 8 or 17 hex
	// digits). CreateNetworkInterface refuses a group that is none of
	// these, the default group or one an instance was launched with, with
	// InvalidGroup.NotFound, as EC2 refuses one that does not exist.
	SecurityGroups []string          `json:"securityGroups,omitempty"`
	Tags           map[string]string `json:"tags,omitempty"`
	Subnets        []Subnet          `json:"subnets"`
}

// Subnet is one subnet. Instances refer to it by ID or by Name.
type Subnet struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
	CIDR string `json:"cidr"`
	AZ   string `json:"az"`
	// RandomAllocation picks free addresses at random as EC2 does (which
	// fragments the subnet for /28 prefixes); default: lowest free.
	RandomAllocation bool              `json:"randomAllocation,omitempty"`
	Tags             map[string]string `json:"tags,omitempty"`
}

// InstanceType is a catalog entry.
type InstanceType struct {
	Name       string `json:"name"`
	VCPUs      int    `json:"vcpus,omitempty"`
	MemoryMiB  int    `json:"memoryMiB,omitempty"`
	MaxENIs    int    `json:"maxENIs"`
	IPv4PerENI int    `json:"ipv4PerENI"`
	Nitro      bool   `json:"nitro,omitempty"`
}

// Instance is one instance, or Count alike ones.
type Instance struct {
	// Subnet is a subnet ID or name.
	Subnet string `json:"subnet"`
	Type   string `json:"type"`
	// Count launches this many (default 1); ID and PrivateIP need Count <= 1.
	Count            int               `json:"count,omitempty"`
	ID               string            `json:"id,omitempty"`
	PrivateIP        string            `json:"privateIp,omitempty"`
	SecurityGroupIDs []string          `json:"securityGroupIds,omitempty"`
	Tags             map[string]string `json:"tags,omitempty"`
}

// Throttle overrides EC2's bucket table (throttle.DefaultSpecs).
type Throttle struct {
	Disabled bool `json:"disabled,omitempty"`
	// Buckets by bucket name (an action name, or "mutating", "describe",
	// "describe-unfiltered"); each replaces the default for that bucket.
	Buckets map[string]throttle.Spec `json:"buckets,omitempty"`
	// Semantics (sharedDescribe, discreteRefill) switches the bucket model
	// from EC2's documented one: per-API describe buckets, continuous
	// refill.
	throttle.Semantics
}

// Fault is a switchable misbehaviour of one action.
type Fault struct {
	ErrorRate float64           `json:"errorRate,omitempty"`
	ErrorCode string            `json:"errorCode,omitempty"`
	Latency   simclock.Duration `json:"latency,omitempty"`
}

// IMDS configures the per-instance metadata services.
type IMDS struct {
	// TokenRequired refuses IMDSv1 requests (no token) with 401.
	TokenRequired bool `json:"tokenRequired,omitempty"`
}

//go:embed example.yaml
var exampleYAML []byte

// Example returns the annotated example scenario (also the default when no
// file is given).
func Example() []byte { return exampleYAML }

// Default returns the example scenario.
func Default() Scenario {
	s, err := Parse(exampleYAML)
	if err != nil {
		panic(fmt.Sprintf("embedded example scenario: %v", err))
	}
	return s
}

// Load reads a scenario file (YAML or JSON).
func Load(path string) (Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Scenario{}, fmt.Errorf("read scenario: %w", err)
	}
	s, err := Parse(b)
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: %w", path, err)
	}
	return s, nil
}

// Parse decodes a scenario, refusing unknown fields so typos are caught.
func Parse(b []byte) (Scenario, error) {
	var s Scenario
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return Scenario{}, fmt.Errorf("parse scenario: %w", err)
	}
	return s, nil
}
