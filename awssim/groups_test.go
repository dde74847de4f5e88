package awssim_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/allotnet/allot/awssim/world"
)

// TestCreateChecksGroups: CreateNetworkInterface takes the VPC's groups
// (its default one, those the scenario declares, those its instances were
// launched with) and refuses any other well-formed group as EC2 refuses
// one that does not exist, InvalidGroup.NotFound naming it, taking no
// address; a malformed ID stays InvalidSecurityGroupID.Malformed.
func TestCreateChecksGroups(t *testing.T) {
	h := startDefault(t)
	const launched = "sg-0000000000000000a"
	if _, err := h.sim.AddInstance(world.InstanceSpec{Type: "m5.large", SubnetID: subnetB, SecurityGroupIDs: []string{launched}}); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		groups      []string
		code, msg   string
		wantGroups  int
		wantDefault bool
	}{
		"none: the VPC's default":  {groups: nil, wantGroups: 1, wantDefault: true},
		"declared in the scenario": {groups: []string{"sg-0123456789abcdef0"}, wantGroups: 1},
		"an instance's group":      {groups: []string{launched}, wantGroups: 1},
		"two known":                {groups: []string{"sg-0123456789abcdef0", launched}, wantGroups: 2},
		"unknown": {groups: []string{"sg-0fffffffffffffff0"}, code: "InvalidGroup.NotFound",
			msg: "The security group 'sg-0fffffffffffffff0' does not exist"},
		"one known, one unknown": {groups: []string{"sg-0123456789abcdef0", "sg-0eeeeeee"}, code: "InvalidGroup.NotFound",
			msg: "The security group 'sg-0eeeeeee' does not exist"},
		"malformed": {groups: []string{"sg-xyz"}, code: "InvalidSecurityGroupID.Malformed"},
	} {
		t.Run(name, func(t *testing.T) {
			before := h.available(t, subnetA)
			out, err := h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{
				SubnetId: aws.String(subnetA), Groups: tc.groups, SecondaryPrivateIpAddressCount: aws.Int32(2),
			})
			if tc.code != "" {
				apiErr(t, err, tc.code, tc.msg)
				if got := h.available(t, subnetA); got != before {
					t.Errorf("available %d after a refused create, want %d", got, before)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := out.NetworkInterface.Groups
			if len(got) != tc.wantGroups {
				t.Fatalf("groups %v, want %d", got, tc.wantGroups)
			}
			vpc := h.sim.World().VPCs()[0]
			if tc.wantDefault && aws.ToString(got[0].GroupId) != vpc.DefaultSecurityGroup {
				t.Errorf("group %s, want the VPC's default %s", aws.ToString(got[0].GroupId), vpc.DefaultSecurityGroup)
			}
			if want := []string{"sg-0123456789abcdef0", launched, vpc.DefaultSecurityGroup}; len(vpc.SecurityGroups) != len(want) {
				t.Errorf("VPC's groups %v, want %v in some order", vpc.SecurityGroups, want)
			}
		})
	}
}
