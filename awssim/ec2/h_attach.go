package ec2

import (
	"github.com/allotnet/allot/awssim/ec2query"
	"github.com/allotnet/allot/awssim/world"
)

func (s *Server) attachNetworkInterface(req *ec2query.Request) (ec2query.Body, error) {
	eniID, err := requiredID(req, "NetworkInterfaceId", world.PrefixENI)
	if err != nil {
		return nil, err
	}
	instID, err := requiredID(req, "InstanceId", world.PrefixInstance)
	if err != nil {
		return nil, err
	}
	idx, ok, err := req.Params.Int("DeviceIndex")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ec2query.Errorf(ec2query.CodeMissingParameter, "The request must contain the parameter DeviceIndex")
	}
	card, _, err := req.Params.Int("NetworkCardIndex")
	if err != nil {
		return nil, err
	}
	if card != 0 {
		return nil, ec2query.Errorf(ec2query.CodeInvalidParameterValue, "Network card index %d is not supported; the simulated instance types have one network card", card)
	}
	if err := req.CheckUnused(); err != nil {
		return nil, err
	}
	id, err := s.world.AttachNetworkInterface(eniID, instID, idx)
	if err != nil {
		return nil, err
	}
	return &attachNetworkInterfaceBody{AttachmentID: id}, nil
}

func (s *Server) detachNetworkInterface(req *ec2query.Request) (ec2query.Body, error) {
	id, err := requiredID(req, "AttachmentId", world.PrefixAttachment)
	if err != nil {
		return nil, err
	}
	force, _, err := req.Params.Bool("Force")
	if err != nil {
		return nil, err
	}
	if err := req.CheckUnused(); err != nil {
		return nil, err
	}
	if err := s.world.DetachNetworkInterface(id, force); err != nil {
		return nil, err
	}
	return &returnBody{Return: true}, nil
}
