package ec2

import (
	"github.com/allotnet/allot/awssim/ec2query"
	"github.com/allotnet/allot/awssim/world"
)

// DescribeVpcs and DescribeSecurityGroups answer what a cluster-wide IPAM
// (Cilium's operator) lists on every resync: the VPCs with their CIDRs,
// and the security groups, which in awssim are each VPC's default group.

var vpcFields = fields[*world.VPC]{
	"vpc-id":     func(v *world.VPC) []string { return one(v.ID) },
	"cidr":       func(v *world.VPC) []string { return v.CIDRs },
	"cidr-block": func(v *world.VPC) []string { return v.CIDRs },
	"state":      func(*world.VPC) []string { return one("available") },
	"is-default": func(*world.VPC) []string { return one("false") },
}

func (s *Server) describeVpcs(req *ec2query.Request) (ec2query.Body, error) {
	ids, err := idList(req, "VpcId", world.PrefixVPC)
	if err != nil {
		return nil, err
	}
	fs, pg, err := readDescribe(req, 1000, vpcFields)
	if err != nil {
		return nil, err
	}
	all := s.world.VPCs()
	for _, id := range ids {
		if !containsFunc(all, func(v world.VPC) bool { return v.ID == id }) {
			return nil, ec2query.Errorf("InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", id)
		}
	}
	var items []*world.VPC
	for k := range all {
		if (len(ids) == 0 || contains(ids, all[k].ID)) && matches(&all[k], all[k].Tags, fs, vpcFields) {
			items = append(items, &all[k])
		}
	}
	seq := map[*world.VPC]uint64{}
	for k, v := range items {
		seq[v] = uint64(k + 1)
	}
	out, next := paginate(items, func(v *world.VPC) uint64 { return seq[v] }, pg)
	body := &describeVpcsBody{NextToken: next}
	for _, v := range out {
		x := xmlVPC{VPCID: v.ID, State: "available", OwnerID: s.world.AccountID(), Tags: xmlTags(v.Tags)}
		if len(v.CIDRs) > 0 {
			x.CIDRBlock = v.CIDRs[0]
		}
		for i, c := range v.CIDRs {
			x.CIDRs = append(x.CIDRs, xmlVPCCIDR{CIDRBlock: c, AssociationID: v.ID + "-cidr-" + string(rune('a'+i)), State: xmlState{"associated"}})
		}
		body.VPCs = append(body.VPCs, x)
	}
	return body, nil
}

// securityGroup is one VPC's default group as DescribeSecurityGroups
// shows it.
type securityGroup struct{ id, vpcID string }

var sgFields = fields[*securityGroup]{
	"group-id":   func(g *securityGroup) []string { return one(g.id) },
	"group-name": func(*securityGroup) []string { return one("default") },
	"vpc-id":     func(g *securityGroup) []string { return one(g.vpcID) },
}

func (s *Server) describeSecurityGroups(req *ec2query.Request) (ec2query.Body, error) {
	ids, err := idList(req, "GroupId", world.PrefixSG)
	if err != nil {
		return nil, err
	}
	fs, pg, err := readDescribe(req, 1000, sgFields)
	if err != nil {
		return nil, err
	}
	var items []*securityGroup
	for _, v := range s.world.VPCs() {
		g := &securityGroup{id: v.DefaultSecurityGroup, vpcID: v.ID}
		if (len(ids) == 0 || contains(ids, g.id)) && matches(g, nil, fs, sgFields) {
			items = append(items, g)
		}
	}
	seq := map[*securityGroup]uint64{}
	for k, g := range items {
		seq[g] = uint64(k + 1)
	}
	out, next := paginate(items, func(g *securityGroup) uint64 { return seq[g] }, pg)
	body := &describeSecurityGroupsBody{NextToken: next}
	for _, g := range out {
		body.Groups = append(body.Groups, xmlSecurityGroup{
			OwnerID: s.world.AccountID(), GroupID: g.id, GroupName: "default",
			Description: "default VPC security group", VPCID: g.vpcID,
		})
	}
	return body, nil
}

func containsFunc[T any](s []T, f func(T) bool) bool {
	for _, x := range s {
		if f(x) {
			return true
		}
	}
	return false
}

type xmlState struct {
	State string `xml:"state"`
}

type xmlVPCCIDR struct {
	CIDRBlock     string   `xml:"cidrBlock"`
	AssociationID string   `xml:"associationId"`
	State         xmlState `xml:"cidrBlockState"`
}

type xmlVPC struct {
	VPCID     string       `xml:"vpcId"`
	State     string       `xml:"state"`
	CIDRBlock string       `xml:"cidrBlock"`
	CIDRs     []xmlVPCCIDR `xml:"cidrBlockAssociationSet>item"`
	IsDefault bool         `xml:"isDefault"`
	OwnerID   string       `xml:"ownerId"`
	Tags      []xmlTag     `xml:"tagSet>item"`
}

type describeVpcsBody struct {
	ec2query.Meta
	VPCs      []xmlVPC `xml:"vpcSet>item"`
	NextToken string   `xml:"nextToken,omitempty"`
}

type xmlSecurityGroup struct {
	OwnerID     string `xml:"ownerId"`
	GroupID     string `xml:"groupId"`
	GroupName   string `xml:"groupName"`
	Description string `xml:"groupDescription"`
	VPCID       string `xml:"vpcId"`
}

type describeSecurityGroupsBody struct {
	ec2query.Meta
	Groups    []xmlSecurityGroup `xml:"securityGroupInfo>item"`
	NextToken string             `xml:"nextToken,omitempty"`
}
