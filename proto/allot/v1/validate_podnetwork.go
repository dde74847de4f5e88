package allotv1

// Validate methods of PodNetworkService's requests, by hand as in
// validate.go. They check shape only; whether the subnets exist, and where,
// the broker asks EC2.

import (
	"fmt"
	"regexp"
	"slices"
)

// Pod network limits. EC2 allows at most 16 security groups on an ENI; a
// pod network with more subnets than 32 in one VPC is a mistake.
const (
	maxPodNetworkSubnets = 32
	maxPodNetworkGroups  = 16
	maxSelectorTags      = 10
	maxTagKeyLen         = 128
	maxTagValueLen       = 256
)

// NodeGroupTag is the instance tag NodeSelector.node_group matches: the tag
// EKS puts on the instances of a managed node group.
const NodeGroupTag = "eks:nodegroup-name"

var podNetworkNameRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// CheckPodNetworkName checks a pod network's name: 1 to 63 lowercase
// letters, digits and '-', starting and ending with a letter or digit (a
// DNS label, so it fits an etcd key and a Kubernetes-style name).
func CheckPodNetworkName(field, v string) error {
	return checkID(field, v, podNetworkNameRe, "1 to 63 lowercase letters, digits and '-', not starting or ending with '-'")
}

func checkSGID(field, v string) error {
	return checkID(field, v, sgIDRe, `a security group ID, "sg-" and 8 to 17 lowercase hex digits`)
}

// checkTags checks a tag map: at most maxSelectorTags keys, each non-empty,
// within EC2's lengths; values may be empty only where emptyValue allows.
func checkTags(field string, m map[string]string, emptyValue bool) error {
	if len(m) > maxSelectorTags {
		return fieldErr(field, "%d tags, more than the limit of %d", len(m), maxSelectorTags)
	}
	for k, v := range m {
		switch {
		case k == "" || len(k) > maxTagKeyLen:
			return fieldErr(field, "tag key %s must have 1 to %d characters", quote(k), maxTagKeyLen)
		case len(v) > maxTagValueLen:
			return fieldErr(field+"["+k+"]", "value longer than %d characters", maxTagValueLen)
		case v == "" && !emptyValue:
			return fieldErr(field+"["+k+"]", "value required (an instance tag matches by exact value)")
		}
	}
	return nil
}

// checkUnique checks each entry with check and refuses duplicates and more
// than most entries.
func checkUnique(field string, vs []string, most int, check func(string, string) error) error {
	if len(vs) > most {
		return fieldErr(field, "%d entries, more than the limit of %d", len(vs), most)
	}
	for i, v := range vs {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := check(f, v); err != nil {
			return err
		}
		if slices.Index(vs, v) != i {
			return fieldErr(f, "%s is listed twice", v)
		}
	}
	return nil
}

// Validate checks a node selector's shape.
func (x *NodeSelector) Validate() error {
	if az := x.GetAvailabilityZone(); az != "" && !azRe.MatchString(az) {
		return fieldErr("selector.availability_zone", "%s is not an availability zone (want e.g. us-east-1a)", quote(az))
	}
	if g := x.GetNodeGroup(); len(g) > maxTagValueLen {
		return fieldErr("selector.node_group", "longer than %d characters", maxTagValueLen)
	}
	if err := checkTags("selector.instance_tags", x.GetInstanceTags(), false); err != nil {
		return err
	}
	if v, ok := x.GetInstanceTags()[NodeGroupTag]; ok && x.GetNodeGroup() != "" && v != x.GetNodeGroup() {
		return fieldErr("selector", "node_group %s and instance_tags[%s] %s can never both match", quote(x.GetNodeGroup()), NodeGroupTag, quote(v))
	}
	return nil
}

// Validate checks a pod network's shape: a name, a selector, at least one
// way to find subnets, and well-formed IDs.
func (x *PodNetwork) Validate() error {
	if x == nil {
		return fieldErr("network", "required")
	}
	if err := CheckPodNetworkName("network.name", x.GetName()); err != nil {
		return err
	}
	if err := x.GetSelector().Validate(); err != nil {
		return fmt.Errorf("network.%w", err)
	}
	if len(x.GetSubnetIds()) == 0 && len(x.GetSubnetTags()) == 0 {
		return fieldErr("network", "subnet_ids or subnet_tags required: a pod network must say where ENIs go")
	}
	if err := checkUnique("network.subnet_ids", x.GetSubnetIds(), maxPodNetworkSubnets, checkSubnetID); err != nil {
		return err
	}
	if err := checkTags("network.subnet_tags", x.GetSubnetTags(), true); err != nil {
		return err
	}
	return checkUnique("network.security_group_ids", x.GetSecurityGroupIds(), maxPodNetworkGroups, checkSGID)
}

// Validate accepts every list request; it has no fields.
func (x *ListPodNetworksRequest) Validate() error { return nil }

// Validate checks the name.
func (x *GetPodNetworkRequest) Validate() error { return CheckPodNetworkName("name", x.GetName()) }

// Validate checks the name.
func (x *DeletePodNetworkRequest) Validate() error { return CheckPodNetworkName("name", x.GetName()) }

// Validate checks the network and the expected revision.
func (x *SetPodNetworkRequest) Validate() error {
	if r := x.GetExpectedRevision(); r < -1 {
		return fieldErr("expected_revision", "%d: want -1 (must not exist), 0 (any) or a revision", r)
	}
	return x.GetNetwork().Validate()
}
