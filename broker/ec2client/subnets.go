package ec2client

import (
	"context"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// SubnetFilter selects subnets by VPC and by tag; every field set must
// match (EC2 ANDs its filters). A tag with an empty value matches any
// value of that key.
type SubnetFilter struct {
	VPCIDs []string
	Tags   map[string]string
	// AnyTagKey keeps the subnets that carry at least one of these tag
	// keys (EC2 ORs the values of one filter), so one call can serve
	// several searches whose tags differ.
	AnyTagKey []string
}

// FindSubnets returns the subnets that match f, sorted by ID.
func (c *Client) FindSubnets(ctx context.Context, f SubnetFilter) ([]SubnetInfo, error) {
	var filters []types.Filter
	if len(f.VPCIDs) > 0 {
		filters = append(filters, types.Filter{Name: aws.String("vpc-id"), Values: f.VPCIDs})
	}
	keys := make([]string, 0, len(f.Tags))
	for k := range f.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := f.Tags[k]; v != "" {
			filters = append(filters, types.Filter{Name: aws.String("tag:" + k), Values: []string{v}})
		} else {
			filters = append(filters, types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
		}
	}
	if len(f.AnyTagKey) > 0 {
		filters = append(filters, types.Filter{Name: aws.String("tag-key"), Values: f.AnyTagKey})
	}
	out, err := c.describeSubnetPages(ctx, &ec2.DescribeSubnetsInput{Filters: filters})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func subnetInfo(s types.Subnet) SubnetInfo {
	return SubnetInfo{
		ID:        aws.ToString(s.SubnetId),
		CIDR:      aws.ToString(s.CidrBlock),
		AZ:        aws.ToString(s.AvailabilityZone),
		VPCID:     aws.ToString(s.VpcId),
		Available: int64(aws.ToInt32(s.AvailableIpAddressCount)),
		Tags:      tagMap(s.Tags),
	}
}
