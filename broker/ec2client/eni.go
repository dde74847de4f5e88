package ec2client

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// ENIInfo is one network interface as EC2 describes it.
type ENIInfo struct {
	ID, MAC, SubnetID, VPCID, AZ, Description, Status, PrimaryIP string
	// InstanceID, AttachmentID and DeviceIndex describe the attachment;
	// DeviceIndex is -1 when the ENI is not attached.
	InstanceID, AttachmentID string
	DeviceIndex              int
	// Addresses are the secondary private IPv4 addresses (the primary is
	// PrimaryIP).
	Addresses []string
	// Prefixes are the delegated IPv4 prefixes in CIDR form.
	Prefixes            []string
	Tags                map[string]string
	SecurityGroups      []string
	DeleteOnTermination bool
}

// CreateENIInput describes a new ENI. Set SecondaryCount or PrefixCount, not
// both.
type CreateENIInput struct {
	SubnetID       string
	SecurityGroups []string
	SecondaryCount int
	PrefixCount    int
	Description    string
	Tags           map[string]string
	// ClientToken makes the create idempotent: EC2 returns the same ENI for
	// a repeated token (and IdempotentParameterMismatch if the rest of the
	// request differs), which is how a new leader finds what a crashed one
	// created.
	ClientToken string
}

// CreateENI creates a network interface pre-filled with its secondary
// addresses or prefixes, tagged, in one call.
func (c *Client) CreateENI(ctx context.Context, in CreateENIInput) (ENIInfo, error) {
	const action = "CreateNetworkInterface"
	if in.SecondaryCount > 0 && in.PrefixCount > 0 {
		return ENIInfo{}, &APIError{Action: action, Err: errors.New("both secondary addresses and prefixes asked for; EC2 takes one kind per ENI")}
	}
	req := &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(in.SubnetID),
		Groups:   in.SecurityGroups,
	}
	if in.SecondaryCount > 0 {
		req.SecondaryPrivateIpAddressCount = aws.Int32(int32(in.SecondaryCount))
	}
	if in.PrefixCount > 0 {
		req.Ipv4PrefixCount = aws.Int32(int32(in.PrefixCount))
	}
	if in.Description != "" {
		req.Description = aws.String(in.Description)
	}
	if in.ClientToken != "" {
		req.ClientToken = aws.String(in.ClientToken)
	}
	if len(in.Tags) > 0 {
		req.TagSpecifications = []types.TagSpecification{{
			ResourceType: types.ResourceTypeNetworkInterface,
			Tags:         sdkTags(in.Tags),
		}}
	}
	out, err := call(ctx, c, action, false, func(ctx context.Context) (*ec2.CreateNetworkInterfaceOutput, error) {
		return c.ec2.CreateNetworkInterface(ctx, req)
	})
	if err != nil {
		return ENIInfo{}, err
	}
	if out.NetworkInterface == nil {
		return ENIInfo{}, &APIError{Action: action, Err: errors.New("response carries no networkInterface")}
	}
	return eniInfo(*out.NetworkInterface), nil
}

// AttachENI attaches an ENI to an instance at a device index and returns the
// attachment ID.
func (c *Client) AttachENI(ctx context.Context, eniID, instanceID string, deviceIndex int) (string, error) {
	const action = "AttachNetworkInterface"
	req := &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: aws.String(eniID),
		InstanceId:         aws.String(instanceID),
		DeviceIndex:        aws.Int32(int32(deviceIndex)),
	}
	out, err := call(ctx, c, action, false, func(ctx context.Context) (*ec2.AttachNetworkInterfaceOutput, error) {
		return c.ec2.AttachNetworkInterface(ctx, req)
	})
	if err != nil {
		return "", err
	}
	if aws.ToString(out.AttachmentId) == "" {
		return "", &APIError{Action: action, Err: errors.New("response carries no attachmentId")}
	}
	return aws.ToString(out.AttachmentId), nil
}

// SetDeleteOnTermination sets the attachment's DeleteOnTermination flag, so
// an ENI allot attached goes away with its instance instead of leaking.
func (c *Client) SetDeleteOnTermination(ctx context.Context, eniID, attachmentID string, on bool) error {
	req := &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String(eniID),
		Attachment: &types.NetworkInterfaceAttachmentChanges{
			AttachmentId:        aws.String(attachmentID),
			DeleteOnTermination: aws.Bool(on),
		},
	}
	_, err := call(ctx, c, "ModifyNetworkInterfaceAttribute", false, func(ctx context.Context) (*ec2.ModifyNetworkInterfaceAttributeOutput, error) {
		return c.ec2.ModifyNetworkInterfaceAttribute(ctx, req)
	})
	return err
}

// AssignAddresses adds count secondary addresses (or, with prefixes, count
// /28 prefixes) to an ENI in one call and returns what EC2 assigned.
func (c *Client) AssignAddresses(ctx context.Context, eniID string, count int, prefixes bool) ([]string, error) {
	const action = "AssignPrivateIpAddresses"
	if count <= 0 {
		return nil, &APIError{Action: action, Err: errors.New("count must be positive")}
	}
	req := &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(eniID)}
	if prefixes {
		req.Ipv4PrefixCount = aws.Int32(int32(count))
	} else {
		req.SecondaryPrivateIpAddressCount = aws.Int32(int32(count))
	}
	out, err := call(ctx, c, action, false, func(ctx context.Context) (*ec2.AssignPrivateIpAddressesOutput, error) {
		return c.ec2.AssignPrivateIpAddresses(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	var added []string
	if prefixes {
		for _, p := range out.AssignedIpv4Prefixes {
			added = append(added, aws.ToString(p.Ipv4Prefix))
		}
	} else {
		for _, a := range out.AssignedPrivateIpAddresses {
			added = append(added, aws.ToString(a.PrivateIpAddress))
		}
	}
	return added, nil
}

// UnassignAddresses removes secondary addresses and prefixes from an ENI in
// one call. With nothing to remove it sends nothing.
func (c *Client) UnassignAddresses(ctx context.Context, eniID string, addrs, prefixes []string) error {
	if len(addrs) == 0 && len(prefixes) == 0 {
		return nil
	}
	req := &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eniID),
		PrivateIpAddresses: addrs,
		Ipv4Prefixes:       prefixes,
	}
	_, err := call(ctx, c, "UnassignPrivateIpAddresses", false, func(ctx context.Context) (*ec2.UnassignPrivateIpAddressesOutput, error) {
		return c.ec2.UnassignPrivateIpAddresses(ctx, req)
	})
	return err
}

// DetachENI detaches an attachment.
func (c *Client) DetachENI(ctx context.Context, attachmentID string, force bool) error {
	req := &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(attachmentID)}
	if force {
		req.Force = aws.Bool(true)
	}
	_, err := call(ctx, c, "DetachNetworkInterface", false, func(ctx context.Context) (*ec2.DetachNetworkInterfaceOutput, error) {
		return c.ec2.DetachNetworkInterface(ctx, req)
	})
	return err
}

// DeleteENI deletes a detached network interface.
func (c *Client) DeleteENI(ctx context.Context, eniID string) error {
	req := &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eniID)}
	_, err := call(ctx, c, "DeleteNetworkInterface", false, func(ctx context.Context) (*ec2.DeleteNetworkInterfaceOutput, error) {
		return c.ec2.DeleteNetworkInterface(ctx, req)
	})
	return err
}

func eniInfo(n types.NetworkInterface) ENIInfo {
	e := ENIInfo{
		ID:          aws.ToString(n.NetworkInterfaceId),
		MAC:         aws.ToString(n.MacAddress),
		SubnetID:    aws.ToString(n.SubnetId),
		VPCID:       aws.ToString(n.VpcId),
		AZ:          aws.ToString(n.AvailabilityZone),
		Description: aws.ToString(n.Description),
		Status:      string(n.Status),
		PrimaryIP:   aws.ToString(n.PrivateIpAddress),
		DeviceIndex: -1,
		Tags:        tagMap(n.TagSet),
	}
	if a := n.Attachment; a != nil {
		e.InstanceID = aws.ToString(a.InstanceId)
		e.AttachmentID = aws.ToString(a.AttachmentId)
		if a.DeviceIndex != nil {
			e.DeviceIndex = int(*a.DeviceIndex)
		}
		e.DeleteOnTermination = aws.ToBool(a.DeleteOnTermination)
	}
	for _, p := range n.PrivateIpAddresses {
		ip := aws.ToString(p.PrivateIpAddress)
		if aws.ToBool(p.Primary) {
			if e.PrimaryIP == "" {
				e.PrimaryIP = ip
			}
			continue
		}
		e.Addresses = append(e.Addresses, ip)
	}
	for _, p := range n.Ipv4Prefixes {
		e.Prefixes = append(e.Prefixes, aws.ToString(p.Ipv4Prefix))
	}
	for _, g := range n.Groups {
		e.SecurityGroups = append(e.SecurityGroups, aws.ToString(g.GroupId))
	}
	return e
}
