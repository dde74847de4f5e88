package ec2

import (
	"strconv"
	"strings"

	"github.com/allotnet/allot/awssim/ec2query"
	"github.com/allotnet/allot/awssim/world"
)

var instanceFields = fields[*world.Instance]{
	"instance-id":         func(i *world.Instance) []string { return one(i.ID) },
	"instance-type":       func(i *world.Instance) []string { return one(i.Type) },
	"availability-zone":   func(i *world.Instance) []string { return one(i.AvailabilityZone) },
	"subnet-id":           func(i *world.Instance) []string { return one(i.SubnetID) },
	"vpc-id":              func(i *world.Instance) []string { return one(i.VPCID) },
	"instance-state-name": func(i *world.Instance) []string { return one(i.State) },
	"instance-state-code": func(*world.Instance) []string { return one("16") },
	"private-ip-address":  func(i *world.Instance) []string { return one(i.PrivateIP) },
	"image-id":            func(i *world.Instance) []string { return one(i.ImageID) },
	"network-interface.network-interface-id": func(i *world.Instance) []string {
		var out []string
		for _, e := range i.NetworkInterfaces {
			out = append(out, e.ID)
		}
		return out
	},
	"network-interface.addresses.private-ip-address": func(i *world.Instance) []string {
		var out []string
		for _, e := range i.NetworkInterfaces {
			out = append(append(out, e.PrivateIP), e.SecondaryIPs...)
		}
		return out
	},
}

func (s *Server) describeInstances(req *ec2query.Request) (ec2query.Body, error) {
	ids, err := idList(req, "InstanceId", world.PrefixInstance)
	if err != nil {
		return nil, err
	}
	fs, pg, err := readDescribe(req, 1000, instanceFields)
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 && pg.max > 0 {
		return nil, ec2query.Errorf(ec2query.CodeInvalidParameterCombo, "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	all := s.world.Instances()
	items := make([]*world.Instance, 0, len(all))
	if len(ids) > 0 {
		byID := map[string]*world.Instance{}
		for i := range all {
			byID[all[i].ID] = &all[i]
		}
		var missing []string
		for _, id := range ids {
			if byID[id] == nil && !contains(missing, id) {
				missing = append(missing, id)
			}
		}
		switch {
		case len(missing) == 1:
			return nil, ec2query.Errorf(world.CodeInstanceNotFound, "The instance ID '%s' does not exist", missing[0])
		case len(missing) > 1:
			return nil, ec2query.Errorf(world.CodeInstanceNotFound, "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
		}
		for i := range all {
			if contains(ids, all[i].ID) {
				items = append(items, &all[i])
			}
		}
	} else {
		for i := range all {
			items = append(items, &all[i])
		}
	}
	var matched []*world.Instance
	for _, i := range items {
		if matches(i, i.Tags, fs, instanceFields) {
			matched = append(matched, i)
		}
	}
	out, next := paginate(matched, func(i *world.Instance) uint64 { return i.Seq }, pg)
	body := &describeInstancesBody{NextToken: next}
	for _, i := range out {
		body.Reservations = append(body.Reservations, xmlReservation{
			ReservationID: "r-" + strings.TrimPrefix(i.ID, "i-"), OwnerID: s.world.AccountID(),
			Instances: []xmlInstance{s.xmlInstance(i)},
		})
	}
	return body, nil
}

func (s *Server) xmlInstance(i *world.Instance) xmlInstance {
	x := xmlInstance{
		InstanceID: i.ID, ImageID: i.ImageID, State: xmlInstanceState{Code: 16, Name: i.State},
		PrivateDNSName: dnsName(i.PrivateIP, s.world.Region()), InstanceType: i.Type,
		LaunchTime: xmlTime(i.LaunchTime), Placement: xmlPlacement{AvailabilityZone: i.AvailabilityZone, Tenancy: "default"},
		SubnetID: i.SubnetID, VPCID: i.VPCID, PrivateIPAddress: i.PrivateIP, SourceDestCheck: true,
		Architecture: "x86_64", RootDeviceType: "ebs", VirtualizationType: "hvm", Hypervisor: "xen",
		Tags: xmlTags(i.Tags),
	}
	for k := range i.NetworkInterfaces {
		e := &i.NetworkInterfaces[k]
		if e.Attachment != nil && e.Attachment.DeviceIndex == 0 {
			x.Groups = xmlGroups(e.SecurityGroups)
			x.SourceDestCheck = e.SourceDestCheck
		}
		xe := xmlInstanceENI{
			NetworkInterfaceID: e.ID, SubnetID: e.SubnetID, VPCID: e.VPCID, Description: e.Description,
			OwnerID: s.world.AccountID(), Status: e.Status, MACAddress: e.MAC, PrivateIPAddress: e.PrivateIP,
			PrivateDNSName: dnsName(e.PrivateIP, s.world.Region()), SourceDestCheck: e.SourceDestCheck,
			InterfaceType: e.InterfaceType, Groups: xmlGroups(e.SecurityGroups),
			PrivateIPs: s.xmlPrivateIPs(e), Prefixes: xmlPrefixes(e.Prefixes),
		}
		if a := e.Attachment; a != nil {
			xe.Attachment = &xmlInstanceENIAttachment{
				AttachmentID: a.ID, DeviceIndex: a.DeviceIndex, Status: a.Status,
				AttachTime: xmlTime(a.AttachTime), DeleteOnTermination: a.DeleteOnTermination,
			}
		}
		x.NetworkInterfaces = append(x.NetworkInterfaces, xe)
	}
	return x
}

var instanceTypeFields = fields[*world.InstanceType]{
	"instance-type": func(t *world.InstanceType) []string { return one(t.Name) },
	"hypervisor":    func(t *world.InstanceType) []string { return one(t.Hypervisor()) },
	"network-info.maximum-network-interfaces": func(t *world.InstanceType) []string {
		return one(strconv.Itoa(t.MaxENIs))
	},
	"network-info.ipv4-addresses-per-interface": func(t *world.InstanceType) []string {
		return one(strconv.Itoa(t.IPv4PerENI))
	},
	"vcpu-info.default-vcpus":               func(t *world.InstanceType) []string { return one(strconv.Itoa(t.VCPUs)) },
	"memory-info.size-in-mib":               func(t *world.InstanceType) []string { return one(strconv.Itoa(t.MemoryMiB)) },
	"current-generation":                    func(*world.InstanceType) []string { return one("true") },
	"processor-info.supported-architecture": func(*world.InstanceType) []string { return one("x86_64") },
}

func (s *Server) describeInstanceTypes(req *ec2query.Request) (ec2query.Body, error) {
	names, err := req.Params.StringList("InstanceType")
	if err != nil {
		return nil, err
	}
	fs, pg, err := readDescribe(req, 100, instanceTypeFields)
	if err != nil {
		return nil, err
	}
	all := s.world.InstanceTypes()
	var items []*world.InstanceType
	if len(names) > 0 {
		var missing []string
		for _, n := range names {
			found := false
			for k := range all {
				if all[k].Name == n {
					found = true
				}
			}
			if !found {
				missing = append(missing, printable(n))
			}
		}
		if len(missing) > 0 {
			return nil, ec2query.Errorf(world.CodeInvalidInstanceType, "The following supplied instance types do not exist: [%s]", strings.Join(missing, ", "))
		}
	}
	for k := range all {
		if (len(names) == 0 || contains(names, all[k].Name)) && matches(&all[k], nil, fs, instanceTypeFields) {
			items = append(items, &all[k])
		}
	}
	// Sequence numbers for pagination: the position in the sorted catalog.
	seq := map[*world.InstanceType]uint64{}
	for k, t := range items {
		seq[t] = uint64(k + 1)
	}
	out, next := paginate(items, func(t *world.InstanceType) uint64 { return seq[t] }, pg)
	body := &describeInstanceTypesBody{NextToken: next}
	for _, t := range out {
		body.InstanceTypes = append(body.InstanceTypes, xmlInstanceTypeOf(t))
	}
	return body, nil
}

func xmlInstanceTypeOf(t *world.InstanceType) xmlInstanceType {
	cores := max(t.VCPUs/2, 1)
	return xmlInstanceType{
		InstanceType: t.Name, CurrentGeneration: true, Hypervisor: t.Hypervisor(),
		BurstablePerformanceSupported: strings.HasPrefix(t.Name, "t"),
		ProcessorInfo:                 xmlProcessorInfo{SupportedArchitectures: []string{"x86_64"}},
		VCPUInfo:                      xmlVCPUInfo{DefaultVCPUs: t.VCPUs, DefaultCores: cores, DefaultThreadsPerCore: max(t.VCPUs/cores, 1)},
		MemoryInfo:                    xmlMemoryInfo{SizeInMiB: t.MemoryMiB},
		NetworkInfo: xmlNetworkInfo{
			NetworkPerformance: t.NetworkPerformance, MaximumNetworkInterfaces: t.MaxENIs,
			MaximumNetworkCards: 1, NetworkCards: []xmlNetworkCard{{NetworkPerformance: t.NetworkPerformance, MaximumNetworkInterfaces: t.MaxENIs}},
			IPv4AddressesPerInterface: t.IPv4PerENI, IPv6AddressesPerInterface: t.IPv4PerENI, IPv6Supported: true,
			ENASupport: map[bool]string{true: "required", false: "unsupported"}[t.Nitro],
		},
	}
}

var subnetFields = fields[*world.Subnet]{
	"subnet-id":                  func(s *world.Subnet) []string { return one(s.ID) },
	"vpc-id":                     func(s *world.Subnet) []string { return one(s.VPCID) },
	"availability-zone":          func(s *world.Subnet) []string { return one(s.AvailabilityZone) },
	"cidr-block":                 func(s *world.Subnet) []string { return one(s.CIDR) },
	"cidr":                       func(s *world.Subnet) []string { return one(s.CIDR) },
	"state":                      func(*world.Subnet) []string { return one("available") },
	"available-ip-address-count": func(s *world.Subnet) []string { return one(strconv.Itoa(s.AvailableIPs)) },
}

func (s *Server) describeSubnets(req *ec2query.Request) (ec2query.Body, error) {
	ids, err := idList(req, "SubnetId", world.PrefixSubnet)
	if err != nil {
		return nil, err
	}
	fs, pg, err := readDescribe(req, 1000, subnetFields)
	if err != nil {
		return nil, err
	}
	all := s.world.Subnets()
	for _, id := range ids {
		found := false
		for k := range all {
			found = found || all[k].ID == id
		}
		if !found {
			return nil, ec2query.Errorf(world.CodeSubnetNotFound, "The subnet ID '%s' does not exist", id)
		}
	}
	var items []*world.Subnet
	for k := range all {
		if (len(ids) == 0 || contains(ids, all[k].ID)) && matches(&all[k], all[k].Tags, fs, subnetFields) {
			items = append(items, &all[k])
		}
	}
	seq := map[*world.Subnet]uint64{}
	for k, sn := range items {
		seq[sn] = uint64(k + 1)
	}
	out, next := paginate(items, func(sn *world.Subnet) uint64 { return seq[sn] }, pg)
	body := &describeSubnetsBody{NextToken: next}
	for _, sn := range out {
		body.Subnets = append(body.Subnets, xmlSubnet{
			SubnetID: sn.ID, SubnetARN: "arn:aws:ec2:" + s.world.Region() + ":" + s.world.AccountID() + ":subnet/" + sn.ID,
			State: "available", VPCID: sn.VPCID, OwnerID: s.world.AccountID(), CIDRBlock: sn.CIDR,
			AvailableIPAddressCount: sn.AvailableIPs, AvailabilityZone: sn.AvailabilityZone, Tags: xmlTags(sn.Tags),
		})
	}
	return body, nil
}
