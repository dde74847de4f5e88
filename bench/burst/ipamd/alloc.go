package ipamd

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/allotnet/allot/agent/identity"
)

// increaseDatastorePool fills an ENI with room first and creates an ENI only
// when no ENI took anything.
func (n *Node) increaseDatastorePool(ctx context.Context) error {
	increased, err := n.tryAssignCidrs(ctx)
	if err != nil {
		return err
	}
	if increased {
		n.poolActionNow()
		return nil
	}
	if n.ds.stats().enis >= n.cfg.MaxENIs {
		return nil
	}
	if err := n.tryAllocateENI(ctx); err != nil {
		n.countErr("allocENI")
		return err
	}
	n.poolActionNow()
	return nil
}

// toAllocate is how many addresses (secondary-IP mode) or prefixes
// (getPrefixesNeeded) one call asks for.
func (n *Node) toAllocate() int {
	if !n.cfg.PrefixMode {
		return n.maxIPsPerENI
	}
	return max(1, n.cfg.WarmPrefixTarget-n.ds.stats().freePrefixes)
}

// tryAssignCidrs is tryAssignIPs / tryAssignPrefixes: one
// AssignPrivateIpAddresses on the first ENI with room.
func (n *Node) tryAssignCidrs(ctx context.Context) (bool, error) {
	want := n.toAllocate()
	// The first ENI with room takes it all (ipamd moves on to the next one
	// only when subnet discovery finds the subnet full, which no burst here
	// does).
	enis := n.ds.allocatable(n.maxIPsPerENI, n.cfg.PrefixMode)
	if len(enis) == 0 {
		return false, nil
	}
	e := enis[0]
	count := min(n.maxIPsPerENI-e.cidrs(n.cfg.PrefixMode), want)
	out, err := n.assign(ctx, e.id, count)
	if err != nil && !isCode(err, "PrivateIpAddressLimitExceeded") {
		n.countErr("assign")
		// "Try to just get one more."
		out, err = n.assign(ctx, e.id, 1)
		if err != nil && !isCode(err, "PrivateIpAddressLimitExceeded") {
			n.countErr("assignOne")
			return false, fmt.Errorf("assign on %s: %w", e.id, err)
		}
	}
	if err != nil {
		// The datastore is out of date; ipamd re-reads the ENI from EC2.
		return true, n.refreshENI(ctx, e.id)
	}
	n.addAssigned(e.id, out)
	return true, nil
}

func (n *Node) assign(ctx context.Context, eniID string, count int) (*ec2.AssignPrivateIpAddressesOutput, error) {
	in := &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(eniID)}
	if n.cfg.PrefixMode {
		in.Ipv4PrefixCount = aws.Int32(int32(count))
	} else {
		in.SecondaryPrivateIpAddressCount = aws.Int32(int32(count))
	}
	return n.ec2.AssignPrivateIpAddresses(ctx, in)
}

func (n *Node) addAssigned(eniID string, out *ec2.AssignPrivateIpAddressesOutput) {
	var ips []netip.Addr
	for _, a := range out.AssignedPrivateIpAddresses {
		if ip, err := netip.ParseAddr(aws.ToString(a.PrivateIpAddress)); err == nil {
			ips = append(ips, ip)
		}
	}
	var pfx []netip.Prefix
	for _, p := range out.AssignedIpv4Prefixes {
		if pp, err := netip.ParsePrefix(aws.ToString(p.Ipv4Prefix)); err == nil {
			pfx = append(pfx, pp)
		}
	}
	n.ds.addIPs(eniID, ips)
	n.ds.addPrefixes(eniID, pfx)
}

// refreshENI re-reads one ENI's addresses from EC2 (GetIPv4sFromEC2).
func (n *Node) refreshENI(ctx context.Context, eniID string) error {
	out, err := n.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{eniID}})
	if err != nil {
		return err
	}
	for _, ni := range out.NetworkInterfaces {
		var ips []netip.Addr
		for _, a := range ni.PrivateIpAddresses {
			if aws.ToBool(a.Primary) {
				continue
			}
			if ip, err := netip.ParseAddr(aws.ToString(a.PrivateIpAddress)); err == nil {
				ips = append(ips, ip)
			}
		}
		var pfx []netip.Prefix
		for _, p := range ni.Ipv4Prefixes {
			if pp, err := netip.ParsePrefix(aws.ToString(p.Ipv4Prefix)); err == nil {
				pfx = append(pfx, pp)
			}
		}
		n.ds.addIPs(eniID, ips)
		n.ds.addPrefixes(eniID, pfx)
	}
	return nil
}

// tryAllocateENI creates, attaches and sets up one ENI with its addresses.
func (n *Node) tryAllocateENI(ctx context.Context) error {
	want := n.maxIPsPerENI
	if n.cfg.PrefixMode {
		want = min(n.toAllocate(), n.maxIPsPerENI)
	}
	eniID, err := n.allocENI(ctx, want)
	if err != nil {
		return err
	}
	meta, err := n.waitForENIAndIPsAttached(ctx, eniID, want)
	if err != nil {
		n.countErr("waitENIAttached")
		return err
	}
	n.ds.addENI(eniID, meta.DeviceNumber, false)
	if len(meta.IPv4s) > 1 {
		n.ds.addIPs(eniID, meta.IPv4s[1:])
	}
	n.ds.addPrefixes(eniID, meta.Prefixes)
	return nil
}

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

// createENI is awsutils.createENI: with subnet discovery, DescribeSubnets
// of the node's VPC and AZ first (only the node's own subnet qualifies
// here: no other subnet carries the kubernetes.io/role/cni tag).
func (n *Node) createENI(ctx context.Context, want int) (string, error) {
	if n.cfg.SubnetDiscovery {
		_, err := n.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{
			{Name: aws.String("vpc-id"), Values: []string{n.vpcID}},
			{Name: aws.String("availability-zone"), Values: []string{n.az}},
		}})
		if err != nil {
			// "Defaulting to same subnet as the primary interface."
			n.countErr("describeSubnets")
		}
	}
	in := &ec2.CreateNetworkInterfaceInput{
		SubnetId:    aws.String(n.subnetID),
		Groups:      n.securityGroups,
		Description: aws.String("aws-K8S-" + n.cfg.InstanceID),
		TagSpecifications: []types.TagSpecification{{
			ResourceType: types.ResourceTypeNetworkInterface,
			Tags: []types.Tag{
				{Key: aws.String("node.k8s.amazonaws.com/instance_id"), Value: aws.String(n.cfg.InstanceID)},
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
	return n.withBackoff(ctx, 500*time.Millisecond, 0.15, func() error {
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
		err := n.withBackoff(ctx, 200*time.Millisecond, 0.15, func() error {
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
	err := n.withBackoff(ctx, 100*time.Millisecond, 0.15, func() error {
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
// maxENIBackoffDelay, jitter, 2), maxENIEC2APIRetries, fn), scaled.
func (n *Node) withBackoff(ctx context.Context, minDelay time.Duration, jitter float64, fn func() error) error {
	var err error
	delay := minDelay
	for attempt := 0; attempt < maxENIEC2APIRetries; attempt++ {
		if err = fn(); err == nil {
			return nil
		}
		j := 1 + jitter*(2*rand.Float64()-1)
		if serr := n.sleep(ctx, time.Duration(float64(delay)*j)); serr != nil {
			return serr
		}
		delay = min(delay*2, maxENIBackoffDelay)
	}
	return err
}

// isCode reports whether err is an EC2 API error with code.
func isCode(err error, code string) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == code
}
