package awssim_test

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestCreateDescribeDelete(t *testing.T) {
	h := startDefault(t)
	before := h.available(t, subnetA)
	if before != 256-5-1 { // one instance's primary address
		t.Fatalf("subnet a available = %d; want 250", before)
	}
	out, err := h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId:                       aws.String(subnetA),
		Description:                    aws.String("allot test"),
		Groups:                         []string{"sg-0123456789abcdef0"},
		SecondaryPrivateIpAddressCount: aws.Int32(4),
		TagSpecifications: []types.TagSpecification{{
			ResourceType: types.ResourceTypeNetworkInterface,
			Tags:         []types.Tag{{Key: aws.String("allot.io/cluster"), Value: aws.String("c1")}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	eni := out.NetworkInterface
	if eni.Status != types.NetworkInterfaceStatusAvailable || len(eni.PrivateIpAddresses) != 5 ||
		*eni.Description != "allot test" || len(eni.Groups) != 1 || *eni.Groups[0].GroupId != "sg-0123456789abcdef0" ||
		len(eni.TagSet) != 1 || *eni.TagSet[0].Value != "c1" || *eni.VpcId != "vpc-0123456789abcdef0" ||
		*eni.AvailabilityZone != "us-east-1a" || eni.MacAddress == nil {
		t.Fatalf("created ENI = %+v", eni)
	}
	if !*eni.PrivateIpAddresses[0].Primary || *eni.PrivateIpAddresses[0].PrivateIpAddress != *eni.PrivateIpAddress {
		t.Fatalf("first address is not the primary: %+v", eni.PrivateIpAddresses[0])
	}
	if got := h.available(t, subnetA); got != before-5 {
		t.Fatalf("available after create = %d; want %d", got, before-5)
	}

	desc, err := h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{
		NetworkInterfaceIds: []string{*eni.NetworkInterfaceId},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(desc.NetworkInterfaces) != 1 || *desc.NetworkInterfaces[0].NetworkInterfaceId != *eni.NetworkInterfaceId {
		t.Fatalf("describe by ID = %+v", desc.NetworkInterfaces)
	}
	got := desc.NetworkInterfaces[0]
	var ips []string
	for _, a := range got.PrivateIpAddresses {
		ips = append(ips, *a.PrivateIpAddress)
	}
	var want []string
	for _, a := range eni.PrivateIpAddresses {
		want = append(want, *a.PrivateIpAddress)
	}
	if !slices.Equal(ips, want) {
		t.Fatalf("described addresses %v; created %v", ips, want)
	}

	if _, err := h.ec2.DeleteNetworkInterface(h.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: eni.NetworkInterfaceId}); err != nil {
		t.Fatal(err)
	}
	if got := h.available(t, subnetA); got != before {
		t.Fatalf("available after delete = %d; want %d", got, before)
	}
	_, err = h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{*eni.NetworkInterfaceId}})
	apiErr(t, err, "InvalidNetworkInterfaceID.NotFound", "The networkInterface ID '"+*eni.NetworkInterfaceId+"' does not exist")
	_, err = h.ec2.DeleteNetworkInterface(h.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: eni.NetworkInterfaceId})
	apiErr(t, err, "InvalidNetworkInterfaceID.NotFound", "The networkInterface ID '"+*eni.NetworkInterfaceId+"' does not exist")
}
