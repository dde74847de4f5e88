package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/instanceview"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

type factsMap map[string]ec2client.InstanceInfo

func (f factsMap) Get(_ context.Context, id string) (ec2client.InstanceInfo, error) {
	in, ok := f[id]
	if !ok {
		return in, instanceview.ErrNotFound
	}
	return in, nil
}

// TestCheckClaims: a registration whose claims EC2 contradicts is refused
// naming both values; one EC2 agrees with is recorded with EC2's values.
func TestCheckClaims(t *testing.T) {
	ec2 := factsMap{"i-a": {
		ID: "i-a", State: "running", Type: "m5.large", AZ: "us-east-1a", VPCID: "vpc-1", SubnetID: "subnet-a",
		PrimaryENI: "eni-a", PrimaryIP: "10.0.0.4", SecurityGroups: []string{"sg-1", "sg-2"},
	}, "i-stopped": {ID: "i-stopped", State: "stopped"}}
	good := func() store.Node {
		return store.Node{InstanceID: "i-a", InstanceType: "m5.large", AvailabilityZone: "us-east-1a", VPCID: "vpc-1",
			SubnetID: "subnet-a", PrimaryENIID: "eni-a", PrimaryIP: "10.0.0.4", SecurityGroups: []string{"sg-2", "sg-1"}}
	}
	n := good()
	if err := checkClaims(context.Background(), ec2, &n); err != nil {
		t.Fatalf("matching claims: %v", err)
	}
	if strings.Join(n.SecurityGroups, ",") != "sg-1,sg-2" {
		t.Errorf("recorded groups %v, want EC2's order", n.SecurityGroups)
	}
	for name, tc := range map[string]struct {
		edit func(*store.Node)
		want string
	}{
		"another instance's primary ENI": {func(n *store.Node) { n.PrimaryENIID = "eni-b" }, `primary_eni_id: the agent says "eni-b", EC2 says "eni-a"`},
		"a subnet in another zone":       {func(n *store.Node) { n.SubnetID = "subnet-b" }, `subnet_id: the agent says "subnet-b", EC2 says "subnet-a"`},
		"another zone":                   {func(n *store.Node) { n.AvailabilityZone = "us-east-1b" }, "availability_zone"},
		"a bigger type":                  {func(n *store.Node) { n.InstanceType = "m5.24xlarge" }, "instance_type"},
		"another VPC":                    {func(n *store.Node) { n.VPCID = "vpc-2" }, "vpc_id"},
		"another address":                {func(n *store.Node) { n.PrimaryIP = "10.0.0.5" }, "primary_ip"},
		"other groups":                   {func(n *store.Node) { n.SecurityGroups = []string{"sg-1"} }, "security_group_ids"},
		"unknown instance":               {func(n *store.Node) { n.InstanceID = "i-zzz" }, "EC2 does not know"},
		"stopped instance":               {func(n *store.Node) { n.InstanceID = "i-stopped" }, "stopped, not running"},
		"a huge claim":                   {func(n *store.Node) { n.SubnetID = strings.Repeat("s", 1<<20) }, "(1048576 bytes)"},
	} {
		n := good()
		tc.edit(&n)
		err := checkClaims(context.Background(), ec2, &n)
		if !errors.Is(err, rpcerr.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalid with %q", name, err, tc.want)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("%s: error of %d bytes", name, len(err.Error()))
		}
	}
}
