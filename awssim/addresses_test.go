package awssim_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func (h *harness) assign(eni string, count int32) (*ec2.AssignPrivateIpAddressesOutput, error) {
	return h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), SecondaryPrivateIpAddressCount: aws.Int32(count),
	})
}

// TestAddressLimitsPerType fills an attached ENI to its type's per-ENI
// limit, checks one more is refused, and checks subnet counts throughout.
func TestAddressLimitsPerType(t *testing.T) {
	h := startDefault(t)
	for _, c := range []struct {
		typ   string
		slots int
	}{{"c5.xlarge", 15}, {"m5.large", 10}, {"r5.2xlarge", 15}, {"m5.24xlarge", 50}, {"t3.medium", 6}} {
		t.Run(c.typ, func(t *testing.T) {
			inst := h.addInstance(t, c.typ, subnetB)
			eni := h.createENI(t, subnetB, 0)
			if _, err := h.attach(eni, inst, 1); err != nil {
				t.Fatal(err)
			}
			before := h.available(t, subnetB)
			out, err := h.assign(eni, int32(c.slots-1))
			if err != nil {
				t.Fatalf("assign %d: %v", c.slots-1, err)
			}
			if len(out.AssignedPrivateIpAddresses) != c.slots-1 || *out.NetworkInterfaceId != eni {
				t.Fatalf("assigned %d addresses; want %d", len(out.AssignedPrivateIpAddresses), c.slots-1)
			}
			if got := h.available(t, subnetB); got != before-(c.slots-1) {
				t.Fatalf("available = %d; want %d", got, before-(c.slots-1))
			}
			_, err = h.assign(eni, 1)
			apiErr(t, err, "PrivateIpAddressLimitExceeded", "")
			if got := h.available(t, subnetB); got != before-(c.slots-1) {
				t.Fatalf("refused assign changed available to %d", got)
			}
			// The primary ENI obeys the same limit.
			primary, _ := h.sim.World().Instance(inst)
			_, err = h.assign(primary.NetworkInterfaces[0].ID, int32(c.slots))
			apiErr(t, err, "PrivateIpAddressLimitExceeded", "")
			// Freeing all secondaries returns them to the subnet.
			var ips []string
			for _, a := range out.AssignedPrivateIpAddresses {
				ips = append(ips, *a.PrivateIpAddress)
			}
			if _, err := h.ec2.UnassignPrivateIpAddresses(h.ctx, &ec2.UnassignPrivateIpAddressesInput{
				NetworkInterfaceId: aws.String(eni), PrivateIpAddresses: ips,
			}); err != nil {
				t.Fatal(err)
			}
			if got := h.available(t, subnetB); got != before {
				t.Fatalf("available after unassign = %d; want %d", got, before)
			}
		})
	}
}

func TestAssignListAndUnassignRules(t *testing.T) {
	h := startDefault(t)
	eni := h.createENI(t, subnetA, 0)
	primary := *h.describeENI(t, eni).PrivateIpAddress
	before := h.available(t, subnetA)
	out, err := h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), PrivateIpAddresses: []string{"10.0.0.200", "10.0.0.201"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.AssignedPrivateIpAddresses) != 2 || *out.AssignedPrivateIpAddresses[0].PrivateIpAddress != "10.0.0.200" {
		t.Fatalf("assigned %+v", out.AssignedPrivateIpAddresses)
	}
	if got := h.available(t, subnetA); got != before-2 {
		t.Fatalf("available = %d; want %d", got, before-2)
	}
	// Taken, reserved and outside addresses.
	other := h.createENI(t, subnetA, 0)
	_, err = h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(other), PrivateIpAddresses: []string{"10.0.0.200"},
	})
	apiErr(t, err, "InvalidIPAddress.InUse", "")
	for _, bad := range []string{"10.0.0.1", "10.0.0.255", "10.0.9.9", "not-an-ip"} {
		_, err = h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{
			NetworkInterfaceId: aws.String(other), PrivateIpAddresses: []string{bad},
		})
		apiErr(t, err, "InvalidParameterValue", "")
	}
	// AllowReassignment moves the address.
	if _, err := h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(other), PrivateIpAddresses: []string{"10.0.0.200"}, AllowReassignment: aws.Bool(true),
	}); err != nil {
		t.Fatalf("reassign: %v", err)
	}
	if got := h.describeENI(t, eni); len(got.PrivateIpAddresses) != 2 {
		t.Fatalf("source ENI keeps %d addresses; want 2 after reassignment", len(got.PrivateIpAddresses))
	}
	// Unassign rules: the primary and foreign addresses are refused.
	_, err = h.ec2.UnassignPrivateIpAddresses(h.ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), PrivateIpAddresses: []string{primary},
	})
	apiErr(t, err, "InvalidParameterValue", "")
	_, err = h.ec2.UnassignPrivateIpAddresses(h.ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), PrivateIpAddresses: []string{"10.0.0.200"},
	})
	apiErr(t, err, "InvalidParameterValue", "Some of the specified addresses are not assigned to interface "+eni)
	// Mixed count and list, and nothing at all.
	_, err = h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), PrivateIpAddresses: []string{"10.0.0.210"}, SecondaryPrivateIpAddressCount: aws.Int32(1),
	})
	apiErr(t, err, "InvalidParameterCombination", "")
	_, err = h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(eni)})
	apiErr(t, err, "MissingParameter", "")
}

// TestSubnetExhaustion fills the /27 (27 usable addresses) and checks both
// create and assign fail with InsufficientFreeAddressesInSubnet, atomically.
func TestSubnetExhaustion(t *testing.T) {
	h := startDefault(t)
	if got := h.available(t, subnetSmall); got != 27 {
		t.Fatalf("/27 available = %d; want 32-5", got)
	}
	a := h.createENI(t, subnetSmall, 19) // 20 addresses
	if got := h.available(t, subnetSmall); got != 7 {
		t.Fatalf("available = %d; want 7", got)
	}
	_, err := h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(subnetSmall), SecondaryPrivateIpAddressCount: aws.Int32(7), // 8 > 7
	})
	apiErr(t, err, "InsufficientFreeAddressesInSubnet", "")
	if got := h.available(t, subnetSmall); got != 7 {
		t.Fatalf("failed create leaked addresses: available = %d; want 7", got)
	}
	_, err = h.assign(a, 8)
	apiErr(t, err, "InsufficientFreeAddressesInSubnet", "")
	if _, err := h.assign(a, 7); err != nil {
		t.Fatalf("assign of the last 7: %v", err)
	}
	if got := h.available(t, subnetSmall); got != 0 {
		t.Fatalf("available = %d; want 0", got)
	}
	_, err = h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnetSmall)})
	apiErr(t, err, "InsufficientFreeAddressesInSubnet", "")
}

// TestPrefixes assigns /28 prefixes, checks alignment and accounting, and
// provokes InsufficientCidrBlocks by fragmenting the subnet.
func TestPrefixes(t *testing.T) {
	h := startDefault(t)
	before := h.available(t, subnetB) // 251
	out, err := h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(subnetB), Ipv4PrefixCount: aws.Int32(2),
	})
	if err != nil {
		t.Fatal(err)
	}
	eni := *out.NetworkInterface.NetworkInterfaceId
	if len(out.NetworkInterface.Ipv4Prefixes) != 2 {
		t.Fatalf("prefixes = %+v", out.NetworkInterface.Ipv4Prefixes)
	}
	for _, p := range out.NetworkInterface.Ipv4Prefixes {
		pfx := netip.MustParsePrefix(*p.Ipv4Prefix)
		if pfx.Bits() != 28 || pfx.Masked() != pfx || !netip.MustParsePrefix("10.0.1.0/24").Contains(pfx.Addr()) {
			t.Fatalf("prefix %s is not an aligned /28 of the subnet", pfx)
		}
	}
	if got := h.available(t, subnetB); got != before-1-32 {
		t.Fatalf("available = %d; want %d (primary + 2 prefixes)", got, before-33)
	}
	// Explicit prefix, then a conflicting one.
	if _, err := h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), Ipv4Prefixes: []string{"10.0.1.224/28"},
	}); err != nil {
		t.Fatalf("assign explicit prefix: %v", err)
	}
	_, err = h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), Ipv4Prefixes: []string{"10.0.1.224/28"},
	})
	apiErr(t, err, "InvalidIPAddress.InUse", "")
	_, err = h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), Ipv4Prefixes: []string{"10.0.1.8/28"},
	})
	apiErr(t, err, "InvalidParameterValue", "")
	// Fragment: one address in every remaining free /28 block. The subnet
	// still has many free addresses but no free aligned /28.
	frag := h.createENI(t, subnetB, 0)
	var fill []string
	for b := 0; b < 16; b++ {
		fill = append(fill, fmt.Sprintf("10.0.1.%d", b*16+8))
	}
	for _, a := range fill {
		_, _ = h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{
			NetworkInterfaceId: aws.String(frag), PrivateIpAddresses: []string{a},
		})
	}
	free := h.available(t, subnetB)
	if free < 16 {
		t.Fatalf("only %d free; the test wants fragmentation, not exhaustion", free)
	}
	_, err = h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), Ipv4PrefixCount: aws.Int32(1),
	})
	apiErr(t, err, "InsufficientCidrBlocks", "")
	if got := h.available(t, subnetB); got != free {
		t.Fatalf("refused prefix assign changed available %d -> %d", free, got)
	}
	// Prefixes and addresses can't be mixed.
	_, err = h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), Ipv4PrefixCount: aws.Int32(1), SecondaryPrivateIpAddressCount: aws.Int32(1),
	})
	apiErr(t, err, "InvalidParameterCombination", "")
	// Unassign a prefix: its 16 addresses come back.
	if _, err := h.ec2.UnassignPrivateIpAddresses(h.ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), Ipv4Prefixes: []string{"10.0.1.224/28"},
	}); err != nil {
		t.Fatal(err)
	}
	if got := h.available(t, subnetB); got != free+16 {
		t.Fatalf("available after prefix unassign = %d; want %d", got, free+16)
	}
}

// TestPrefixesNeedNitro: t2.medium (Xen) refuses prefixes on attach and assign.
func TestPrefixesNeedNitro(t *testing.T) {
	h := startDefault(t)
	inst := h.addInstance(t, "t2.medium", subnetA)
	withPrefix, err := h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(subnetA), Ipv4PrefixCount: aws.Int32(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.attach(*withPrefix.NetworkInterface.NetworkInterfaceId, inst, 1)
	apiErr(t, err, "InvalidParameterValue", "")
	plain := h.createENI(t, subnetA, 0)
	if _, err := h.attach(plain, inst, 1); err != nil {
		t.Fatal(err)
	}
	_, err = h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(plain), Ipv4PrefixCount: aws.Int32(1),
	})
	apiErr(t, err, "InvalidParameterValue", "")
	it, err := h.ec2.DescribeInstanceTypes(h.ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"t2.medium"}})
	if err != nil {
		t.Fatal(err)
	}
	if it.InstanceTypes[0].Hypervisor != types.InstanceTypeHypervisorXen {
		t.Fatalf("t2.medium hypervisor = %s", it.InstanceTypes[0].Hypervisor)
	}
}
