package ec2

import (
	"github.com/allotnet/allot/awssim/ec2query"
	"github.com/allotnet/allot/awssim/world"
)

func readResourceIDs(req *ec2query.Request) ([]string, error) {
	ids, err := req.Params.StringList("ResourceId")
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, ec2query.Errorf(ec2query.CodeMissingParameter, "The request must contain the parameter ResourceId.1")
	}
	for _, id := range ids {
		if world.ResourcePrefix(id) == "" {
			return nil, ec2query.Errorf(world.CodeInvalidID, "The ID '%s' is not valid", printable(id))
		}
	}
	return ids, nil
}

func (s *Server) createTags(req *ec2query.Request) (ec2query.Body, error) {
	ids, err := readResourceIDs(req)
	if err != nil {
		return nil, err
	}
	tags, err := readTags(req.Params, "Tag")
	if err != nil {
		return nil, err
	}
	if len(tags) == 0 {
		return nil, ec2query.Errorf(ec2query.CodeMissingParameter, "The request must contain the parameter Tag.1.Key")
	}
	if err := req.CheckUnused(); err != nil {
		return nil, err
	}
	if err := s.world.CreateTags(ids, tags); err != nil {
		return nil, err
	}
	return &returnBody{Return: true}, nil
}

func (s *Server) deleteTags(req *ec2query.Request) (ec2query.Body, error) {
	ids, err := readResourceIDs(req)
	if err != nil {
		return nil, err
	}
	var fs []world.TagFilter
	for _, it := range req.Params.List("Tag") {
		k, ok := it.String("Key")
		if !ok {
			return nil, ec2query.Errorf(ec2query.CodeMissingParameter, "The request must contain the parameter %s.Key", it.Key())
		}
		f := world.TagFilter{Key: k}
		if v, ok := it.String("Value"); ok {
			f.Value = &v
		}
		fs = append(fs, f)
	}
	if err := req.CheckUnused(); err != nil {
		return nil, err
	}
	if err := s.world.DeleteTags(ids, fs); err != nil {
		return nil, err
	}
	return &returnBody{Return: true}, nil
}
