package ec2

import (
	"strings"

	"github.com/allotnet/allot/awssim/ec2query"
	"github.com/allotnet/allot/awssim/world"
)

func (s *Server) createNetworkInterface(req *ec2query.Request) (ec2query.Body, error) {
	p := req.Params
	var in world.CreateNetworkInterfaceInput
	var err error
	if in.SubnetID, err = requiredID(req, "SubnetId", world.PrefixSubnet); err != nil {
		return nil, err
	}
	in.Description, _ = p.String("Description")
	in.InterfaceType, _ = p.String("InterfaceType")
	if in.InterfaceType != "" && in.InterfaceType != "interface" {
		return nil, ec2query.Errorf(ec2query.CodeInvalidParameterValue, "Interface type '%s' is not supported by awssim", printable(in.InterfaceType))
	}
	if in.SecurityGroupIDs, err = p.StringList("SecurityGroupId"); err != nil {
		return nil, err
	}
	in.PrimaryIP, _ = p.String("PrivateIpAddress")
	for _, spec := range p.List("PrivateIpAddresses") {
		addr, ok := spec.String("PrivateIpAddress")
		if !ok {
			return nil, ec2query.Errorf(ec2query.CodeMissingParameter, "The request must contain the parameter %s.PrivateIpAddress", spec.Key())
		}
		primary, _, err := spec.Bool("Primary")
		if err != nil {
			return nil, err
		}
		switch {
		case !primary:
			in.SecondaryIPs = append(in.SecondaryIPs, addr)
		case in.PrimaryIP != "" && in.PrimaryIP != addr:
			return nil, ec2query.Errorf(ec2query.CodeInvalidParameterCombo, "Only one primary private IPv4 address may be specified")
		default:
			in.PrimaryIP = addr
		}
	}
	if in.SecondaryCount, err = nonNegative(req, "SecondaryPrivateIpAddressCount"); err != nil {
		return nil, err
	}
	if in.PrefixCount, err = nonNegative(req, "Ipv4PrefixCount"); err != nil {
		return nil, err
	}
	for _, spec := range p.List("Ipv4Prefix") {
		pfx, ok := spec.String("Ipv4Prefix")
		if !ok {
			return nil, ec2query.Errorf(ec2query.CodeMissingParameter, "The request must contain the parameter %s.Ipv4Prefix", spec.Key())
		}
		in.Prefixes = append(in.Prefixes, pfx)
	}
	if in.Tags, err = readTagSpecifications(req, "network-interface"); err != nil {
		return nil, err
	}
	in.ClientToken, _ = p.String("ClientToken")
	if len(in.ClientToken) > 64 {
		return nil, ec2query.Errorf(ec2query.CodeInvalidParameterValue, "ClientToken must be at most 64 characters")
	}
	if err := req.CheckUnused(); err != nil {
		return nil, err
	}
	e, err := s.world.CreateNetworkInterface(in)
	if err != nil {
		return nil, err
	}
	return &createNetworkInterfaceBody{NetworkInterface: s.xmlENI(&e), ClientToken: in.ClientToken}, nil
}

func (s *Server) deleteNetworkInterface(req *ec2query.Request) (ec2query.Body, error) {
	id, err := requiredID(req, "NetworkInterfaceId", world.PrefixENI)
	if err != nil {
		return nil, err
	}
	if err := req.CheckUnused(); err != nil {
		return nil, err
	}
	if err := s.world.DeleteNetworkInterface(id); err != nil {
		return nil, err
	}
	return &returnBody{Return: true}, nil
}

func (s *Server) modifyNetworkInterfaceAttribute(req *ec2query.Request) (ec2query.Body, error) {
	p := req.Params
	var in world.ModifyNetworkInterfaceInput
	var err error
	if in.ID, err = requiredID(req, "NetworkInterfaceId", world.PrefixENI); err != nil {
		return nil, err
	}
	n := 0
	if att := p.Get("Attachment"); att != nil {
		in.AttachmentID, _ = att.String("AttachmentId")
		v, ok, err := att.Bool("DeleteOnTermination")
		if err != nil {
			return nil, err
		}
		if ok {
			in.DeleteOnTermination = &v
			n++
		}
	}
	if d := p.Get("Description"); d != nil {
		v, _ := d.String("Value")
		in.Description = &v
		n++
	}
	if sdc := p.Get("SourceDestCheck"); sdc != nil {
		v, ok, err := sdc.Bool("Value")
		if err != nil {
			return nil, err
		}
		if ok {
			in.SourceDestCheck = &v
			n++
		}
	}
	if in.SecurityGroupIDs, err = p.StringList("SecurityGroupId"); err != nil {
		return nil, err
	}
	if len(in.SecurityGroupIDs) > 0 {
		n++
	}
	if err := req.CheckUnused(); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, ec2query.Errorf(ec2query.CodeMissingParameter, "No attribute specified")
	}
	if err := s.world.ModifyNetworkInterfaceAttribute(in); err != nil {
		return nil, err
	}
	return &returnBody{Return: true}, nil
}

var eniFields = fields[*world.NetworkInterface]{
	"network-interface-id": func(e *world.NetworkInterface) []string { return one(e.ID) },
	"status":               func(e *world.NetworkInterface) []string { return one(e.Status) },
	"subnet-id":            func(e *world.NetworkInterface) []string { return one(e.SubnetID) },
	"vpc-id":               func(e *world.NetworkInterface) []string { return one(e.VPCID) },
	"availability-zone":    func(e *world.NetworkInterface) []string { return one(e.AvailabilityZone) },
	"description":          func(e *world.NetworkInterface) []string { return one(e.Description) },
	"mac-address":          func(e *world.NetworkInterface) []string { return one(e.MAC) },
	"owner-id":             func(e *world.NetworkInterface) []string { return one(e.OwnerID) },
	"interface-type":       func(e *world.NetworkInterface) []string { return one(e.InterfaceType) },
	"requester-managed":    func(e *world.NetworkInterface) []string { return one(boolString(e.RequesterManaged)) },
	"source-dest-check":    func(e *world.NetworkInterface) []string { return one(boolString(e.SourceDestCheck)) },
	"group-id":             func(e *world.NetworkInterface) []string { return e.SecurityGroups },
	"private-ip-address":   func(e *world.NetworkInterface) []string { return append([]string{e.PrivateIP}, e.SecondaryIPs...) },
	"addresses.private-ip-address": func(e *world.NetworkInterface) []string {
		return append([]string{e.PrivateIP}, e.SecondaryIPs...)
	},
	"ipv4-prefix": func(e *world.NetworkInterface) []string { return e.Prefixes },
	"attachment.instance-id": func(e *world.NetworkInterface) []string {
		return attField(e, func(a *world.Attachment) string { return a.InstanceID })
	},
	"attachment.attachment-id": func(e *world.NetworkInterface) []string {
		return attField(e, func(a *world.Attachment) string { return a.ID })
	},
	"attachment.status": func(e *world.NetworkInterface) []string {
		return attField(e, func(a *world.Attachment) string { return a.Status })
	},
	"attachment.device-index": func(e *world.NetworkInterface) []string {
		return attField(e, func(a *world.Attachment) string { return itoa(a.DeviceIndex) })
	},
	"attachment.delete-on-termination": func(e *world.NetworkInterface) []string {
		return attField(e, func(a *world.Attachment) string { return boolString(a.DeleteOnTermination) })
	},
}

func attField(e *world.NetworkInterface, f func(*world.Attachment) string) []string {
	if e.Attachment == nil {
		return nil
	}
	return one(f(e.Attachment))
}

func (s *Server) describeNetworkInterfaces(req *ec2query.Request) (ec2query.Body, error) {
	ids, err := idList(req, "NetworkInterfaceId", world.PrefixENI)
	if err != nil {
		return nil, err
	}
	fs, pg, err := readDescribe(req, 1000, eniFields)
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 && pg.max > 0 {
		return nil, ec2query.Errorf(ec2query.CodeInvalidParameterCombo, "The parameter NetworkInterfaceIds cannot be used with the parameter MaxResults")
	}
	all := s.world.NetworkInterfaces()
	var items []*world.NetworkInterface
	if len(ids) > 0 {
		byID := make(map[string]*world.NetworkInterface, len(ids))
		want := map[string]bool{}
		for _, id := range ids {
			want[id] = true
		}
		for _, e := range all {
			if want[e.ID] {
				byID[e.ID] = e
			}
		}
		var missing []string
		for _, id := range ids {
			if byID[id] == nil && !contains(missing, id) {
				missing = append(missing, id)
			}
		}
		if len(missing) == 1 {
			return nil, ec2query.Errorf(world.CodeENINotFound, "The networkInterface ID '%s' does not exist", missing[0])
		}
		if len(missing) > 1 {
			return nil, ec2query.Errorf(world.CodeENINotFound, "The networkInterface IDs '%s' do not exist", strings.Join(missing, ", "))
		}
		for _, e := range all {
			if byID[e.ID] != nil {
				items = append(items, e)
			}
		}
	} else {
		items = all
	}
	var matched []*world.NetworkInterface
	for _, e := range items {
		if matches(e, e.Tags, fs, eniFields) {
			matched = append(matched, e)
		}
	}
	out, next := paginate(matched, func(e *world.NetworkInterface) uint64 { return e.Seq }, pg)
	body := &describeNetworkInterfacesBody{NextToken: next, NetworkInterfaces: make([]xmlENI, len(out))}
	for i, e := range out {
		body.NetworkInterfaces[i] = s.xmlENI(e)
	}
	return body, nil
}
