package cilium

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// resyncInstances is InstancesManager.Resync: VPCs, subnets, security
// groups and every ENI with an IPv4 address, each list through the
// limiter, then the cache replaced. It returns when it started; on an
// error the instances API counts as not ready and maintenance waits.
func (o *Operator) resyncInstances(ctx context.Context) (time.Time, error) {
	start := time.Now()
	cache, err := o.listInstances(ctx)
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.ready = false
		return start, fmt.Errorf("cilium operator: resync: %w", err)
	}
	o.cache, o.ready = cache, true
	return start, nil
}

func (o *Operator) listInstances(ctx context.Context) (map[string][]*eni, error) {
	if err := o.limit(ctx); err != nil {
		return nil, err
	}
	if _, err := o.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{}); err != nil {
		return nil, err
	}
	if err := o.limit(ctx); err != nil {
		return nil, err
	}
	if _, err := o.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); err != nil {
		return nil, err
	}
	if err := o.limit(ctx); err != nil {
		return nil, err
	}
	if _, err := o.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{}); err != nil {
		return nil, err
	}
	cache := map[string][]*eni{}
	p := ec2.NewDescribeNetworkInterfacesPaginator(o.ec2, &ec2.DescribeNetworkInterfacesInput{
		Filters: []types.Filter{{Name: aws.String("private-ip-address"), Values: []string{"*"}}},
	})
	for p.HasMorePages() {
		if err := o.limit(ctx); err != nil {
			return nil, err
		}
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, ni := range out.NetworkInterfaces {
			if ni.Attachment == nil || ni.Attachment.InstanceId == nil {
				continue
			}
			e := parseENI(ni)
			e.index = int(aws.ToInt32(ni.Attachment.DeviceIndex))
			id := aws.ToString(ni.Attachment.InstanceId)
			cache[id] = append(cache[id], e)
		}
	}
	return cache, nil
}

// parseENI is parseENI without the primary address (usePrimary false):
// the secondary addresses and every address of each prefix.
func parseENI(ni types.NetworkInterface) *eni {
	e := &eni{id: aws.ToString(ni.NetworkInterfaceId), subnetID: aws.ToString(ni.SubnetId)}
	for _, g := range ni.Groups {
		e.groups = append(e.groups, aws.ToString(g.GroupId))
	}
	for _, a := range ni.PrivateIpAddresses {
		if aws.ToBool(a.Primary) {
			continue
		}
		if ip, err := netip.ParseAddr(aws.ToString(a.PrivateIpAddress)); err == nil {
			e.addrs = append(e.addrs, ip)
		}
	}
	for _, pf := range ni.Ipv4Prefixes {
		p, err := netip.ParsePrefix(aws.ToString(pf.Ipv4Prefix))
		if err != nil {
			continue
		}
		e.prefixes++
		for a := p.Masked().Addr(); p.Contains(a); a = a.Next() {
			e.addrs = append(e.addrs, a)
		}
	}
	return e
}
