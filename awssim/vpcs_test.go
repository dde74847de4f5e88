package awssim_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestDescribeVpcsAndSecurityGroups lists the VPC and its default security
// group through the SDK, by ID and by filter, as a cluster-wide IPAM's
// resync does, and checks an unknown VPC ID is refused.
func TestDescribeVpcsAndSecurityGroups(t *testing.T) {
	h := startDefault(t)
	vpcs := h.sim.World().VPCs()
	if len(vpcs) == 0 {
		t.Fatal("scenario has no VPC")
	}
	v := vpcs[0]
	out, err := h.ec2.DescribeVpcs(h.ctx, &ec2.DescribeVpcsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Vpcs) != len(vpcs) || aws.ToString(out.Vpcs[0].VpcId) != v.ID || aws.ToString(out.Vpcs[0].CidrBlock) != v.CIDRs[0] ||
		len(out.Vpcs[0].CidrBlockAssociationSet) != len(v.CIDRs) {
		t.Errorf("DescribeVpcs: %+v, want %+v", out.Vpcs, vpcs)
	}
	one, err := h.ec2.DescribeVpcs(h.ctx, &ec2.DescribeVpcsInput{Filters: []types.Filter{filter("vpc-id", v.ID)}})
	if err != nil || len(one.Vpcs) != 1 {
		t.Errorf("DescribeVpcs by filter: %v, %v", one, err)
	}
	_, err = h.ec2.DescribeVpcs(h.ctx, &ec2.DescribeVpcsInput{VpcIds: []string{"vpc-0000000000000dead"}})
	apiErr(t, err, "InvalidVpcID.NotFound", "The vpc ID 'vpc-0000000000000dead' does not exist")

	sgs, err := h.ec2.DescribeSecurityGroups(h.ctx, &ec2.DescribeSecurityGroupsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sgs.SecurityGroups) != len(vpcs) || aws.ToString(sgs.SecurityGroups[0].GroupId) != v.DefaultSecurityGroup ||
		aws.ToString(sgs.SecurityGroups[0].VpcId) != v.ID {
		t.Errorf("DescribeSecurityGroups: %+v, want the default group %s of %s", sgs.SecurityGroups, v.DefaultSecurityGroup, v.ID)
	}
}
