package ec2

import (
	"github.com/allotnet/allot/awssim/ec2query"
	"github.com/allotnet/allot/awssim/world"
)

// readTags reads Tag.N.Key / Tag.N.Value members under n.
func readTags(n *ec2query.Node, name string) (map[string]string, error) {
	items := n.List(name)
	if items == nil {
		return nil, nil
	}
	out := make(map[string]string, len(items))
	for _, it := range items {
		k, ok := it.String("Key")
		if !ok {
			return nil, ec2query.Errorf(ec2query.CodeMissingParameter, "The request must contain the parameter %s.Key", it.Key())
		}
		v, _ := it.String("Value")
		if _, dup := out[k]; dup {
			return nil, ec2query.Errorf(ec2query.CodeInvalidParameterValue, "Duplicate tag key '%s' specified.", printable(k))
		}
		out[k] = v
	}
	return out, nil
}

// readTagSpecifications reads TagSpecification.N for one resource type.
func readTagSpecifications(req *ec2query.Request, resourceType string) (map[string]string, error) {
	var out map[string]string
	for _, spec := range req.Params.List("TagSpecification") {
		rt, _ := spec.String("ResourceType")
		if rt != resourceType {
			return nil, ec2query.Errorf(ec2query.CodeInvalidParameterValue, "'%s' is not a valid taggable resource type for this operation.", printable(rt))
		}
		tags, err := readTags(spec, "Tag")
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = map[string]string{}
		}
		for k, v := range tags {
			if _, dup := out[k]; dup {
				return nil, ec2query.Errorf(ec2query.CodeInvalidParameterValue, "Duplicate tag key '%s' specified.", printable(k))
			}
			out[k] = v
		}
	}
	return out, nil
}

// requiredID reads a required ID parameter and checks its form.
func requiredID(req *ec2query.Request, name, prefix string) (string, error) {
	id, err := req.Params.Required(name)
	if err != nil {
		return "", err
	}
	return id, world.CheckID(prefix, id)
}

// idList reads an ID list parameter (Name.N) and checks each ID's form.
func idList(req *ec2query.Request, name, prefix string) ([]string, error) {
	ids, err := req.Params.StringList(name)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if err := world.CheckID(prefix, id); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// nonNegative reads an optional count.
func nonNegative(req *ec2query.Request, name string) (int, error) {
	v, ok, err := req.Params.Int(name)
	if err != nil {
		return 0, err
	}
	if ok && v < 0 {
		return 0, ec2query.Errorf(ec2query.CodeInvalidParameterValue, "Value (%d) for parameter %s is invalid. It must not be negative.", v, name)
	}
	return v, nil
}
