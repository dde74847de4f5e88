package scenario

import (
	"fmt"

	"github.com/allotnet/allot/awssim/world"
)

// Apply creates the scenario's VPCs, subnets, instance types and instances
// in w. Subnet names become Name tags.
func Apply(w *world.World, s Scenario) error {
	byName := map[string]string{}
	for _, v := range s.VPCs {
		vv, err := w.AddVPC(world.VPCSpec{ID: v.ID, CIDRs: v.CIDRs, DefaultSecurityGroup: v.DefaultSecurityGroup,
			SecurityGroups: v.SecurityGroups, Tags: v.Tags})
		if err != nil {
			return fmt.Errorf("vpc %v: %w", v.CIDRs, err)
		}
		for _, sn := range v.Subnets {
			tags := map[string]string{}
			for k, val := range sn.Tags {
				tags[k] = val
			}
			if sn.Name != "" {
				tags["Name"] = sn.Name
			}
			got, err := w.AddSubnet(world.SubnetSpec{
				ID: sn.ID, VPCID: vv.ID, AvailabilityZone: sn.AZ, CIDR: sn.CIDR,
				RandomAllocation: sn.RandomAllocation, Tags: tags,
			})
			if err != nil {
				return fmt.Errorf("subnet %s: %w", sn.CIDR, err)
			}
			if sn.Name != "" {
				if _, dup := byName[sn.Name]; dup {
					return fmt.Errorf("subnet name %q used twice", sn.Name)
				}
				byName[sn.Name] = got.ID
			}
		}
	}
	for _, t := range s.InstanceTypes {
		err := w.SetInstanceType(world.InstanceType{
			Name: t.Name, VCPUs: t.VCPUs, MemoryMiB: t.MemoryMiB, MaxENIs: t.MaxENIs, IPv4PerENI: t.IPv4PerENI, Nitro: t.Nitro,
		})
		if err != nil {
			return fmt.Errorf("instance type: %w", err)
		}
	}
	for i, in := range s.Instances {
		n := max(in.Count, 1)
		if n > 1 && (in.ID != "" || in.PrivateIP != "") {
			return fmt.Errorf("instances[%d]: id and privateIp need count <= 1", i)
		}
		subnetID := in.Subnet
		if id, ok := byName[in.Subnet]; ok {
			subnetID = id
		}
		for range n {
			_, err := w.AddInstance(world.InstanceSpec{
				ID: in.ID, Type: in.Type, SubnetID: subnetID, PrivateIP: in.PrivateIP,
				SecurityGroupIDs: in.SecurityGroupIDs, Tags: in.Tags,
			})
			if err != nil {
				return fmt.Errorf("instances[%d] (%s in %s): %w", i, in.Type, in.Subnet, err)
			}
		}
	}
	return nil
}

// SubnetID resolves a subnet name (or ID) of the scenario in w.
func SubnetID(w *world.World, nameOrID string) (string, bool) {
	for _, s := range w.Subnets() {
		if s.ID == nameOrID || s.Tags["Name"] == nameOrID {
			return s.ID, true
		}
	}
	return "", false
}
