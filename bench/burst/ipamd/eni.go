package ipamd

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/allotnet/allot/agent/identity"
)

// allocENI is awsutils.AllocENI.
func (n *Node) allocENI(ctx context.Context, want int) (string, error) {
	eniID, err := n.createENI(ctx, want)
	if err != nil {
		return "", fmt.Errorf("alloc ENI: create: %w", err)
	}
	attachmentID, err := n.attachENI(ctx, eniID)
	if err != nil {
		if derr := n.deleteENI(ctx, eniID); derr != nil {
			n.countErr("deleteAfterFailedAttach")
		}
		return "", fmt.Errorf("alloc ENI: attach: %w", err)
	}
	_, err = n.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String(eniID),
		Attachment:         &types.NetworkInterfaceAttachmentChanges{AttachmentId: aws.String(attachmentID), DeleteOnTermination: aws.Bool(true)},
	})
	if err != nil {
		if ferr := n.freeENI(ctx, eniID); ferr != nil {
			n.countErr("freeAfterFailedModify")
		}
		return "", fmt.Errorf("alloc ENI: modify attribute: %w", err)
	}
	return eniID, nil
}

// createENI is awsutils.createENI at v1.23.1 (without custom networking).
// With subnet discovery it lists the VPC's subnets in the node's zone
// (GetVpcSubnets, one DescribeSubnets); when that fails it falls back to
// the primary ENI's subnet, but only after IsSubnetExcluded has checked that
// subnet, which lists the subnets again; when that fails too, the creation
// is abandoned. Without subnet discovery it checks the primary subnet the
// same way and creates the ENI whatever the check's outcome. Only the
// node's own subnet qualifies here: no other subnet carries the
// kubernetes.io/role/cni tag.
func (n *Node) createENI(ctx context.Context, want int) (string, error) {
	if !n.cfg.SubnetDiscovery {
		if _, err := n.vpcSubnets(ctx); err != nil {
			n.countErr("subnetExcludedCheck")
		}
	} else if _, err := n.vpcSubnets(ctx); err != nil {
		n.countErr("describeSubnets")
		if _, err := n.vpcSubnets(ctx); err != nil {
			n.countErr("subnetExcludedCheck")
			return "", fmt.Errorf("check if primary subnet is excluded: %w; quit ENI creation attempt", err)
		}
	}
	in := &ec2.CreateNetworkInterfaceInput{
		SubnetId:    aws.String(n.subnetID),
		Groups:      n.securityGroups,
		Description: aws.String("aws-K8S-" + n.cfg.InstanceID),
		TagSpecifications: []types.TagSpecification{{
			ResourceType: types.ResourceTypeNetworkInterface,
			Tags: []types.Tag{
				{Key: aws.String(eniNodeTagKey), Value: aws.String(n.cfg.InstanceID)},
				{Key: aws.String("node.k8s.amazonaws.com/createdAt"), Value: aws.String(time.Now().UTC().Format(time.RFC3339))},
			},
		}},
	}
	if n.cfg.PrefixMode {
		in.Ipv4PrefixCount = aws.Int32(int32(want))
	} else {
		in.SecondaryPrivateIpAddressCount = aws.Int32(int32(want))
	}
	out, err := n.ec2.CreateNetworkInterface(ctx, in)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.NetworkInterface.NetworkInterfaceId), nil
}

// vpcSubnets is GetVpcSubnets: DescribeSubnets of the node's VPC and zone,
// uncached.
func (n *Node) vpcSubnets(ctx context.Context) ([]types.Subnet, error) {
	out, err := n.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{
		{Name: aws.String("vpc-id"), Values: []string{n.vpcID}},
		{Name: aws.String("availability-zone"), Values: []string{n.az}},
	}})
	if err != nil {
		return nil, fmt.Errorf("describe subnets: %w", err)
	}
	return out.Subnets, nil
}

// attachENI finds a free device index with DescribeInstances and attaches.
func (n *Node) attachENI(ctx context.Context, eniID string) (string, error) {
	out, err := n.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{n.cfg.InstanceID}})
	if err != nil {
		return "", fmt.Errorf("free device number: %w", err)
	}
	used := map[int32]bool{}
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			for _, ni := range inst.NetworkInterfaces {
				if ni.Attachment != nil {
					used[aws.ToInt32(ni.Attachment.DeviceIndex)] = true
				}
			}
		}
	}
	dev := int32(0)
	for used[dev] {
		dev++
	}
	att, err := n.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
		DeviceIndex: aws.Int32(dev), InstanceId: aws.String(n.cfg.InstanceID),
		NetworkInterfaceId: aws.String(eniID), NetworkCardIndex: aws.Int32(0),
	})
	if err != nil {
		return "", err
	}
	return aws.ToString(att.AttachmentId), nil
}

// deleteENI retries DeleteNetworkInterface with awsutils' backoff.
func (n *Node) deleteENI(ctx context.Context, eniID string) error {
	return n.withBackoff(ctx, 500*time.Millisecond, 0.15, maxENIEC2APIRetries, func() error {
		_, err := n.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eniID)})
		if isCode(err, "InvalidNetworkInterfaceID.NotFound") {
			return nil
		}
		return err
	})
}

// freeENI is awsutils.freeENI: find the attachment, detach, wait, delete.
func (n *Node) freeENI(ctx context.Context, eniID string) error {
	out, err := n.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{eniID}})
	if err != nil {
		return err
	}
	if len(out.NetworkInterfaces) == 0 {
		return nil
	}
	if att := out.NetworkInterfaces[0].Attachment; att != nil {
		err := n.withBackoff(ctx, 200*time.Millisecond, 0.15, maxENIEC2APIRetries, func() error {
			_, err := n.ec2.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: att.AttachmentId})
			return err
		})
		if err != nil {
			return err
		}
		if err := n.sleep(ctx, sleepAfterDetach); err != nil {
			return err
		}
	}
	return n.deleteENI(ctx, eniID)
}

// waitForENIAndIPsAttached polls IMDS until the ENI shows with its
// addresses (awsutils, 100 ms doubling, 12 attempts). After the last
// attempt an ENI with some of its addresses is taken as it is.
func (n *Node) waitForENIAndIPsAttached(ctx context.Context, eniID string, want int) (identity.ENIMeta, error) {
	var found identity.ENIMeta
	var seen bool
	err := n.withBackoff(ctx, 100*time.Millisecond, 0.15, maxENIEC2APIRetries, func() error {
		enis, err := identity.ENIs(ctx, n.imds)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(enis, func(m identity.ENIMeta) bool { return m.ENIID == eniID })
		if i < 0 {
			return errors.New("ENI not in IMDS yet")
		}
		found, seen = enis[i], true
		have := len(found.IPv4s) - 1
		if n.cfg.PrefixMode {
			have = len(found.Prefixes)
		}
		if have < want {
			return fmt.Errorf("IMDS shows %d of %d", have, want)
		}
		return nil
	})
	if err != nil && seen && (len(found.IPv4s) > 1 || len(found.Prefixes) > 0) {
		return found, nil
	}
	return found, err
}

// withBackoff is awsutils' retry.NWithBackoff(NewSimpleBackoff(min,
// maxENIBackoffDelay, jitter, 2), attempts, fn), scaled.
func (n *Node) withBackoff(ctx context.Context, minDelay time.Duration, jitter float64, attempts int, fn func() error) error {
	var err error
	delay := minDelay
	for attempt := 0; attempt < attempts; attempt++ {
		if err = fn(); err == nil {
			return nil
		}
		if attempt == attempts-1 {
			break
		}
		j := 1 + jitter*(2*rand.Float64()-1)
		if serr := n.sleep(ctx, time.Duration(float64(delay)*j)); serr != nil {
			return serr
		}
		delay = min(delay*2, maxENIBackoffDelay)
	}
	return err
}
