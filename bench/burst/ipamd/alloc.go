package ipamd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
)

// increaseDatastorePool fills an ENI with room first and creates an ENI only
// when no ENI took anything. A failed ENI allocation is counted, not
// returned: ipamd only logs it ("should not cause node to be NotReady").
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
		n.log.Debug("allocate ENI", "err", err)
		return nil
	}
	n.poolActionNow()
	return nil
}

// tryAssignCidrs is tryAssignIPs / tryAssignPrefixes: one
// AssignPrivateIpAddresses on the first ENI with room.
func (n *Node) tryAssignCidrs(ctx context.Context) (bool, error) {
	want, ok := n.toAssign(n.ds.stats())
	if !ok {
		return false, nil
	}
	// The first ENI with room takes it (ipamd moves on to the next one only
	// when the subnet is out of addresses, which no burst here reaches).
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

// tryAllocateENI creates, attaches and sets up one ENI with its addresses
// (GetENIResourcesToAllocate of them). setupENI adds the ENI to the
// datastore before it checks the ENI's subnet with DescribeSubnets; when
// that check fails the ENI stays in the datastore without its addresses,
// which the reconcile (or the next assign's PrivateIpAddressLimitExceeded)
// recovers later.
func (n *Node) tryAllocateENI(ctx context.Context) error {
	want := n.toCreate(n.ds.stats())
	if want <= 0 {
		return nil
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
	if n.cfg.SubnetDiscovery {
		if _, err := n.vpcSubnets(ctx); err != nil {
			n.countErr("setupENI")
			return fmt.Errorf("set up %s: subnet exclusion check: %w", eniID, err)
		}
	}
	if len(meta.IPv4s) > 1 {
		n.ds.addIPs(eniID, meta.IPv4s[1:])
	}
	n.ds.addPrefixes(eniID, meta.Prefixes)
	return nil
}

// isCode reports whether err is an EC2 API error with code.
func isCode(err error, code string) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == code
}
