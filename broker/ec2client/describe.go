package ec2client

import (
	"context"
	"slices"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Page sizes. Every Describe the client sends paginates (or filters), so all
// of them draw from EC2's larger, faster "filtered" bucket.
const (
	maxResults              = 1000
	maxResultsInstanceTypes = 100 // DescribeInstanceTypes allows no more
	// maxFilterValues is the most values EC2 accepts in one filter; longer
	// ID lists are described in chunks.
	maxFilterValues = 200
)

// DescribeENIsInput selects network interfaces; empty fields select
// everything. All set fields must match.
type DescribeENIsInput struct {
	IDs []string
	// Tags must all be present with these values.
	Tags map[string]string
	// TagKeys must all be present, with any value.
	TagKeys    []string
	InstanceID string
	Status     string
	SubnetID   string
}

// DescribeENIs returns every ENI matching in, following NextToken to the
// end. IDs are sent as a network-interface-id filter rather than as
// NetworkInterfaceId (which EC2 won't combine with MaxResults): the call then
// stays in the filtered bucket, and an ID that no longer exists is simply
// absent from the result instead of failing the whole call with NotFound.
func (c *Client) DescribeENIs(ctx context.Context, in DescribeENIsInput) ([]ENIInfo, error) {
	if len(in.IDs) > maxFilterValues {
		var out []ENIInfo
		for ids := range slices.Chunk(in.IDs, maxFilterValues) {
			part := in
			part.IDs = ids
			got, err := c.DescribeENIs(ctx, part)
			if err != nil {
				return nil, err
			}
			out = append(out, got...)
		}
		return out, nil
	}
	var filters []types.Filter
	add := func(name string, values ...string) {
		filters = append(filters, types.Filter{Name: aws.String(name), Values: values})
	}
	if len(in.IDs) > 0 {
		add("network-interface-id", in.IDs...)
	}
	for _, k := range sortedKeys(in.Tags) {
		add("tag:"+k, in.Tags[k])
	}
	for _, k := range in.TagKeys {
		// One filter per key: values within a filter are ORed, filters
		// are ANDed, and every key must be there.
		add("tag-key", k)
	}
	if in.InstanceID != "" {
		add("attachment.instance-id", in.InstanceID)
	}
	if in.Status != "" {
		add("status", in.Status)
	}
	if in.SubnetID != "" {
		add("subnet-id", in.SubnetID)
	}

	var out []ENIInfo
	var token *string
	for {
		req := &ec2.DescribeNetworkInterfacesInput{Filters: filters, MaxResults: aws.Int32(maxResults), NextToken: token}
		page, err := call(ctx, c, "DescribeNetworkInterfaces", true, func(ctx context.Context) (*ec2.DescribeNetworkInterfacesOutput, error) {
			return c.ec2.DescribeNetworkInterfaces(ctx, req)
		})
		if err != nil {
			return nil, err
		}
		for _, n := range page.NetworkInterfaces {
			out = append(out, eniInfo(n))
		}
		if token = page.NextToken; aws.ToString(token) == "" {
			return out, nil
		}
	}
}

// SubnetInfo is one subnet as EC2 describes it.
type SubnetInfo struct {
	ID, CIDR, AZ, VPCID string
	// Available is EC2's count of free addresses in the subnet.
	Available int64
	// Tags are the subnet's tags.
	Tags map[string]string
}

// DescribeSubnets returns the given subnets (all of them for no IDs). An ID
// that does not exist fails the call with InvalidSubnetID.NotFound, which for
// configured subnets is the error the operator needs to see.
func (c *Client) DescribeSubnets(ctx context.Context, ids []string) ([]SubnetInfo, error) {
	return c.describeSubnetPages(ctx, &ec2.DescribeSubnetsInput{SubnetIds: ids})
}

// describeSubnetPages runs one DescribeSubnets query through every page.
func (c *Client) describeSubnetPages(ctx context.Context, in *ec2.DescribeSubnetsInput) ([]SubnetInfo, error) {
	var out []SubnetInfo
	for {
		req := *in
		page, err := call(ctx, c, "DescribeSubnets", true, func(ctx context.Context) (*ec2.DescribeSubnetsOutput, error) {
			return c.ec2.DescribeSubnets(ctx, &req)
		})
		if err != nil {
			return nil, err
		}
		for _, s := range page.Subnets {
			out = append(out, subnetInfo(s))
		}
		if in.NextToken = page.NextToken; aws.ToString(in.NextToken) == "" {
			return out, nil
		}
	}
}

// InstanceTypeInfo is one instance type's network limits as EC2 describes
// them.
type InstanceTypeInfo struct {
	// MaxENIs is the most network interfaces an instance can have attached,
	// the primary included.
	MaxENIs int
	// IPv4PerENI is the IPv4 address slots of one interface, its primary
	// address included.
	IPv4PerENI int
	// Nitro is true for types on the Nitro hypervisor or bare metal, the
	// ones that accept delegated /28 prefixes.
	Nitro bool
	// VCPUs is the type's default vCPU count (max-pods caps prefix mode by
	// it).
	VCPUs int
}

// DescribeInstanceTypes returns the network limits of the given instance
// types, keyed by type name.
func (c *Client) DescribeInstanceTypes(ctx context.Context, names []string) (map[string]InstanceTypeInfo, error) {
	its := make([]types.InstanceType, len(names))
	for i, n := range names {
		its[i] = types.InstanceType(n)
	}
	out := map[string]InstanceTypeInfo{}
	var token *string
	for {
		req := &ec2.DescribeInstanceTypesInput{InstanceTypes: its, MaxResults: aws.Int32(maxResultsInstanceTypes), NextToken: token}
		page, err := call(ctx, c, "DescribeInstanceTypes", true, func(ctx context.Context) (*ec2.DescribeInstanceTypesOutput, error) {
			return c.ec2.DescribeInstanceTypes(ctx, req)
		})
		if err != nil {
			return nil, err
		}
		for _, it := range page.InstanceTypes {
			l := InstanceTypeInfo{
				Nitro: it.Hypervisor == types.InstanceTypeHypervisorNitro || aws.ToBool(it.BareMetal),
			}
			if ni := it.NetworkInfo; ni != nil {
				l.MaxENIs = int(aws.ToInt32(ni.MaximumNetworkInterfaces))
				l.IPv4PerENI = int(aws.ToInt32(ni.Ipv4AddressesPerInterface))
			}
			if vi := it.VCpuInfo; vi != nil {
				l.VCPUs = int(aws.ToInt32(vi.DefaultVCpus))
			}
			out[string(it.InstanceType)] = l
		}
		if token = page.NextToken; aws.ToString(token) == "" {
			return out, nil
		}
	}
}

// InstanceInfo is one instance as EC2 describes it.
type InstanceInfo struct {
	ID, Type, State, AZ, SubnetID string
	// OwnerID is the account of the instance's reservation.
	OwnerID string
	VPCID   string
	// PrimaryENI, PrimaryIP and SecurityGroups are those of the network
	// interface at device index 0.
	PrimaryENI     string
	PrimaryIP      string
	SecurityGroups []string
	// Tags are the instance's tags.
	Tags map[string]string
}

// DescribeInstances returns the given instances (all for no IDs). As with
// DescribeENIs, IDs go in an instance-id filter with pagination: the filtered
// bucket, and a missing instance is absent rather than an error.
func (c *Client) DescribeInstances(ctx context.Context, ids []string) ([]InstanceInfo, error) {
	if len(ids) > maxFilterValues {
		var out []InstanceInfo
		for chunk := range slices.Chunk(ids, maxFilterValues) {
			got, err := c.DescribeInstances(ctx, chunk)
			if err != nil {
				return nil, err
			}
			out = append(out, got...)
		}
		return out, nil
	}
	var filters []types.Filter
	if len(ids) > 0 {
		filters = []types.Filter{{Name: aws.String("instance-id"), Values: ids}}
	}
	var out []InstanceInfo
	var token *string
	for {
		req := &ec2.DescribeInstancesInput{Filters: filters, MaxResults: aws.Int32(maxResults), NextToken: token}
		page, err := call(ctx, c, "DescribeInstances", true, func(ctx context.Context) (*ec2.DescribeInstancesOutput, error) {
			return c.ec2.DescribeInstances(ctx, req)
		})
		if err != nil {
			return nil, err
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				out = append(out, instanceInfo(aws.ToString(r.OwnerId), i))
			}
		}
		if token = page.NextToken; aws.ToString(token) == "" {
			return out, nil
		}
	}
}

func instanceInfo(owner string, i types.Instance) InstanceInfo {
	info := InstanceInfo{
		ID:       aws.ToString(i.InstanceId),
		Type:     string(i.InstanceType),
		SubnetID: aws.ToString(i.SubnetId),
		VPCID:    aws.ToString(i.VpcId),
		OwnerID:  owner,
	}
	for _, t := range i.Tags {
		if info.Tags == nil {
			info.Tags = map[string]string{}
		}
		info.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	if i.State != nil {
		info.State = string(i.State.Name)
	}
	if i.Placement != nil {
		info.AZ = aws.ToString(i.Placement.AvailabilityZone)
	}
	for _, n := range i.NetworkInterfaces {
		if n.Attachment == nil || aws.ToInt32(n.Attachment.DeviceIndex) != 0 {
			continue
		}
		info.PrimaryENI = aws.ToString(n.NetworkInterfaceId)
		info.PrimaryIP = aws.ToString(n.PrivateIpAddress)
		for _, g := range n.Groups {
			info.SecurityGroups = append(info.SecurityGroups, aws.ToString(g.GroupId))
		}
	}
	return info
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
