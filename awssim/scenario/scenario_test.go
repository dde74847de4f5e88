package scenario

import (
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim/world"
)

func TestExampleParsesAndApplies(t *testing.T) {
	s := Default()
	if s.Timing.IMDSLag == nil || s.Timing.IMDSLag.D() != time.Second || len(s.VPCs) != 1 || len(s.VPCs[0].Subnets) != 3 {
		t.Fatalf("example scenario %+v", s)
	}
	w := world.New(world.Config{Seed: 1})
	if err := Apply(w, s); err != nil {
		t.Fatal(err)
	}
	if n := len(w.Instances()); n != 3 {
		t.Fatalf("%d instances; want 3", n)
	}
	id, ok := SubnetID(w, "private-b")
	if !ok {
		t.Fatal("subnet private-b not found by name")
	}
	sn, _ := w.Subnet(id)
	if sn.CIDR != "10.0.32.0/19" || sn.AvailableIPs != 8192-5-1 {
		t.Fatalf("private-b %+v", sn)
	}
	if it, ok := w.InstanceType("x9.test"); !ok || it.MaxENIs != 2 {
		t.Fatalf("custom type %+v %v", it, ok)
	}
}

func TestParseJSONAndStrictness(t *testing.T) {
	s, err := Parse([]byte(`{"vpcs":[{"cidrs":["10.9.0.0/16"],"subnets":[{"cidr":"10.9.0.0/24","az":"us-east-1c"}]}],
		"timing":{"detachDelay":0.5},"faults":{"*":{"errorRate":0.1,"latency":"250ms"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Timing.DetachDelay.D() != 500*time.Millisecond || s.Faults["*"].Latency.D() != 250*time.Millisecond {
		t.Fatalf("parsed %+v", s)
	}
	if _, err := Parse([]byte("vpcs: []\nvpc: []\n")); err == nil || !strings.Contains(err.Error(), "vpc") {
		t.Fatalf("unknown field accepted: %v", err)
	}
	bad := Scenario{VPCs: []VPC{{CIDRs: []string{"10.0.0.0/16"}, Subnets: []Subnet{{CIDR: "10.1.0.0/24", AZ: "a"}}}}}
	if err := Apply(world.New(world.Config{}), bad); err == nil {
		t.Fatal("subnet outside its VPC accepted")
	}
	many := Scenario{
		VPCs:      []VPC{{CIDRs: []string{"10.0.0.0/16"}, Subnets: []Subnet{{Name: "s", CIDR: "10.0.0.0/28", AZ: "a"}}}},
		Instances: []Instance{{Subnet: "s", Type: "m5.large", Count: 12}},
	}
	if err := Apply(world.New(world.Config{}), many); err == nil || !strings.Contains(err.Error(), "InsufficientFreeAddressesInSubnet") {
		t.Fatalf("12 instances in a /28 (11 usable): %v", err)
	}
}
