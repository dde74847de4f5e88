package awssim_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestCreateWithExplicitAddresses(t *testing.T) {
	h := startDefault(t)
	out, err := h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(subnetA),
		PrivateIpAddresses: []types.PrivateIpAddressSpecification{
			{PrivateIpAddress: aws.String("10.0.0.50")},
			{PrivateIpAddress: aws.String("10.0.0.40"), Primary: aws.Bool(true)},
			{PrivateIpAddress: aws.String("10.0.0.51")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := out.NetworkInterface
	if *e.PrivateIpAddress != "10.0.0.40" || len(e.PrivateIpAddresses) != 3 ||
		*e.PrivateIpAddresses[1].PrivateIpAddress != "10.0.0.50" || *e.PrivateIpAddresses[1].Primary {
		t.Fatalf("created %+v", e.PrivateIpAddresses)
	}
	// Without a primary in the list, one is generated and comes first.
	out, err = h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId:           aws.String(subnetA),
		PrivateIpAddresses: []types.PrivateIpAddressSpecification{{PrivateIpAddress: aws.String("10.0.0.60")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if e := out.NetworkInterface; len(e.PrivateIpAddresses) != 2 || *e.PrivateIpAddresses[1].PrivateIpAddress != "10.0.0.60" ||
		!*e.PrivateIpAddresses[0].Primary || *e.PrivateIpAddress == "10.0.0.60" {
		t.Fatalf("created %+v", e.PrivateIpAddresses)
	}
	// Singular PrivateIpAddress is the primary; an in-use one is refused.
	_, err = h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(subnetA), PrivateIpAddress: aws.String("10.0.0.40"),
	})
	apiErr(t, err, "InvalidIPAddress.InUse", "")
	// Explicit prefixes.
	out, err = h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(subnetA), Ipv4Prefixes: []types.Ipv4PrefixSpecificationRequest{{Ipv4Prefix: aws.String("10.0.0.128/28")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := out.NetworkInterface.Ipv4Prefixes; len(p) != 1 || *p[0].Ipv4Prefix != "10.0.0.128/28" {
		t.Fatalf("prefixes %+v", p)
	}
	// Mixing ways of choosing secondaries.
	_, err = h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(subnetA), SecondaryPrivateIpAddressCount: aws.Int32(1), Ipv4PrefixCount: aws.Int32(1),
	})
	apiErr(t, err, "InvalidParameterCombination", "")
	// Unknown and malformed subnets.
	_, err = h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0123456789abcdef0")})
	apiErr(t, err, "InvalidSubnetID.NotFound", "The subnet ID 'subnet-0123456789abcdef0' does not exist")
	_, err = h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-nope")})
	apiErr(t, err, "InvalidSubnetID.Malformed", "")
	// More than any ENI can hold.
	_, err = h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(subnetA), SecondaryPrivateIpAddressCount: aws.Int32(50),
	})
	apiErr(t, err, "PrivateIpAddressLimitExceeded", "")
	// TagSpecification for the wrong resource type.
	_, err = h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(subnetA),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance,
			Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}},
	})
	apiErr(t, err, "InvalidParameterValue", "")
}

// TestClientTokenIdempotency replays a CreateNetworkInterface: same token
// and parameters give the same ENI and use no more addresses; different
// parameters give IdempotentParameterMismatch.
func TestClientTokenIdempotency(t *testing.T) {
	h := startDefault(t)
	in := &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(subnetA), SecondaryPrivateIpAddressCount: aws.Int32(3),
		ClientToken: aws.String("allot-intent-0001"), Description: aws.String("d"),
	}
	first, err := h.ec2.CreateNetworkInterface(h.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if *first.ClientToken != "allot-intent-0001" {
		t.Fatalf("clientToken echoed as %q", aws.ToString(first.ClientToken))
	}
	after := h.available(t, subnetA)
	again, err := h.ec2.CreateNetworkInterface(h.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if *again.NetworkInterface.NetworkInterfaceId != *first.NetworkInterface.NetworkInterfaceId {
		t.Fatalf("replay created %s; want %s", *again.NetworkInterface.NetworkInterfaceId, *first.NetworkInterface.NetworkInterfaceId)
	}
	if got := h.available(t, subnetA); got != after {
		t.Fatalf("replay used addresses: %d -> %d", after, got)
	}
	// The replay reflects the ENI's current state (e.g. now attached).
	if _, err := h.attach(*first.NetworkInterface.NetworkInterfaceId, "i-0000000000000c5a1", 1); err != nil {
		t.Fatal(err)
	}
	again, err = h.ec2.CreateNetworkInterface(h.ctx, in)
	if err != nil || again.NetworkInterface.Attachment == nil {
		t.Fatalf("replay after attach: %v %+v", err, again)
	}
	changed := *in
	changed.SecondaryPrivateIpAddressCount = aws.Int32(4)
	_, err = h.ec2.CreateNetworkInterface(h.ctx, &changed)
	apiErr(t, err, "IdempotentParameterMismatch", "")
	// A different token creates a new ENI.
	other := *in
	other.ClientToken = aws.String("allot-intent-0002")
	o, err := h.ec2.CreateNetworkInterface(h.ctx, &other)
	if err != nil || *o.NetworkInterface.NetworkInterfaceId == *first.NetworkInterface.NetworkInterfaceId {
		t.Fatalf("new token: %v", err)
	}
}
