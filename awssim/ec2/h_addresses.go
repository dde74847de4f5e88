package ec2

import (
	"github.com/allotnet/allot/awssim/ec2query"
	"github.com/allotnet/allot/awssim/world"
)

func (s *Server) assignPrivateIPAddresses(req *ec2query.Request) (ec2query.Body, error) {
	p := req.Params
	var in world.AssignInput
	var err error
	if in.ENIID, err = requiredID(req, "NetworkInterfaceId", world.PrefixENI); err != nil {
		return nil, err
	}
	if in.Addresses, err = p.StringList("PrivateIpAddress"); err != nil {
		return nil, err
	}
	if in.Count, err = nonNegative(req, "SecondaryPrivateIpAddressCount"); err != nil {
		return nil, err
	}
	if in.Prefixes, err = p.StringList("Ipv4Prefix"); err != nil {
		return nil, err
	}
	if in.PrefixCount, err = nonNegative(req, "Ipv4PrefixCount"); err != nil {
		return nil, err
	}
	if in.AllowReassignment, _, err = p.Bool("AllowReassignment"); err != nil {
		return nil, err
	}
	if err := req.CheckUnused(); err != nil {
		return nil, err
	}
	res, err := s.world.AssignPrivateIPAddresses(in)
	if err != nil {
		return nil, err
	}
	body := &assignPrivateIPAddressesBody{NetworkInterfaceID: in.ENIID, Return: true}
	for _, a := range res.Addresses {
		body.AssignedIPs = append(body.AssignedIPs, xmlAssignedIP{PrivateIPAddress: a})
	}
	body.AssignedPrefixes = xmlPrefixes(res.Prefixes)
	return body, nil
}

func (s *Server) unassignPrivateIPAddresses(req *ec2query.Request) (ec2query.Body, error) {
	p := req.Params
	var in world.UnassignInput
	var err error
	if in.ENIID, err = requiredID(req, "NetworkInterfaceId", world.PrefixENI); err != nil {
		return nil, err
	}
	if in.Addresses, err = p.StringList("PrivateIpAddress"); err != nil {
		return nil, err
	}
	if in.Prefixes, err = p.StringList("Ipv4Prefix"); err != nil {
		return nil, err
	}
	if err := req.CheckUnused(); err != nil {
		return nil, err
	}
	if err := s.world.UnassignPrivateIPAddresses(in); err != nil {
		return nil, err
	}
	return &returnBody{Return: true}, nil
}
