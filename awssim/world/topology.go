package world

import (
	"maps"
	"net/netip"
	"slices"
	"time"
)

type vpc struct {
	id           string
	cidrs        []netip.Prefix
	defaultGroup string
	tags         map[string]string
	seq          uint64
}

type subnet struct {
	id, vpcID, az string
	pool          *addrPool
	tags          map[string]string
	seq           uint64
}

// VPC is a read-only view of a VPC.
type VPC struct {
	ID    string
	CIDRs []string
	// DefaultSecurityGroup is given to ENIs created without security groups.
	DefaultSecurityGroup string
	// SecurityGroups are every group of the VPC, the default one included,
	// sorted.
	SecurityGroups []string
	Tags           map[string]string
}

// Subnet is a read-only view of a subnet.
type Subnet struct {
	ID               string `json:"id"`
	VPCID            string `json:"vpcId"`
	AvailabilityZone string `json:"availabilityZone"`
	CIDR             string `json:"cidr"`
	// AvailableIPs is exactly the addresses not in use and not reserved, as
	// DescribeSubnets's availableIpAddressCount reports it.
	AvailableIPs int `json:"availableIps"`
	// Usable is the CIDR's size minus the five AWS reserves.
	Usable int               `json:"usable"`
	Tags   map[string]string `json:"tags,omitempty"`
}

// VPCSpec describes a VPC to add; ID and DefaultSecurityGroup are generated
// when empty. SecurityGroups are the VPC's other groups: the world models
// no CreateSecurityGroup, so the groups ENIs may be created with are these,
// the default one and those instances were launched with.
type VPCSpec struct {
	ID                   string
	CIDRs                []string
	DefaultSecurityGroup string
	SecurityGroups       []string
	Tags                 map[string]string
}

// SubnetSpec describes a subnet to add.
type SubnetSpec struct {
	ID, VPCID, AvailabilityZone, CIDR string
	// RandomAllocation picks free addresses at random, as EC2 does, which
	// fragments the subnet for /28 prefixes over time; otherwise the lowest
	// free address after the last one allocated is used (predictable).
	RandomAllocation bool
	Tags             map[string]string
}

// AddVPC creates a VPC.
func (w *World) AddVPC(s VPCSpec) (VPC, error) {
	var out VPC
	err := w.do(func(_ time.Time) error {
		v := &vpc{id: s.ID, defaultGroup: s.DefaultSecurityGroup, tags: maps.Clone(s.Tags)}
		if v.tags == nil {
			v.tags = map[string]string{}
		}
		if len(s.CIDRs) == 0 {
			return errorf(CodeMissingParameter, "vpc needs at least one CIDR")
		}
		for _, c := range s.CIDRs {
			p, err := netip.ParsePrefix(c)
			if err != nil || !p.Addr().Is4() || p.Bits() < 16 || p.Bits() > 28 {
				return errorf(CodeInvalidParameterValue, "vpc CIDR %q must be an IPv4 prefix between /16 and /28", c)
			}
			v.cidrs = append(v.cidrs, p.Masked())
		}
		if v.id == "" {
			v.id = w.newIDLocked(PrefixVPC)
		} else if !ValidID(PrefixVPC, v.id) || w.ids[v.id] {
			return errorf(CodeInvalidParameterValue, "vpc ID %q is malformed or taken (want vpc- and 8 or 17 hex digits)", v.id)
		}
		if v.defaultGroup == "" {
			v.defaultGroup = w.newIDLocked(PrefixSG)
		}
		if err := w.addGroupsLocked(v.id, append([]string{v.defaultGroup}, s.SecurityGroups...)); err != nil {
			return err
		}
		w.ids[v.id] = true
		v.seq = w.nextSeqLocked()
		w.vpcs[v.id] = v
		out = w.vpcViewLocked(v)
		return nil
	})
	return out, err
}

// AddSubnet creates a subnet inside one of the VPC's CIDRs.
func (w *World) AddSubnet(s SubnetSpec) (Subnet, error) {
	var out Subnet
	err := w.do(func(_ time.Time) error {
		v, ok := w.vpcs[s.VPCID]
		if !ok {
			return errorf("InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", s.VPCID)
		}
		p, err := netip.ParsePrefix(s.CIDR)
		if err != nil || !p.Addr().Is4() || p.Bits() < 16 || p.Bits() > 28 {
			return errorf(CodeInvalidParameterValue, "subnet CIDR %q must be an IPv4 prefix between /16 and /28", s.CIDR)
		}
		p = p.Masked()
		inside := false
		for _, c := range v.cidrs {
			if c.Bits() <= p.Bits() && c.Contains(p.Addr()) {
				inside = true
			}
		}
		if !inside {
			return errorf("InvalidSubnet.Range", "The CIDR '%s' is invalid for VPC %s", p, v.id)
		}
		for _, o := range w.subnets {
			if o.vpcID == v.id && o.pool.cidr.Overlaps(p) {
				return errorf("InvalidSubnet.Conflict", "The CIDR '%s' conflicts with another subnet", p)
			}
		}
		if s.AvailabilityZone == "" {
			return errorf(CodeMissingParameter, "subnet %s needs an availability zone", p)
		}
		sn := &subnet{id: s.ID, vpcID: v.id, az: s.AvailabilityZone, tags: maps.Clone(s.Tags)}
		if sn.tags == nil {
			sn.tags = map[string]string{}
		}
		if sn.id == "" {
			sn.id = w.newIDLocked(PrefixSubnet)
		} else if !ValidID(PrefixSubnet, sn.id) || w.ids[sn.id] {
			return errorf(CodeInvalidParameterValue, "subnet ID %q is malformed or taken (want subnet- and 8 or 17 hex digits)", sn.id)
		}
		w.ids[sn.id] = true
		sn.pool = newAddrPool(p, s.RandomAllocation, w.rng)
		sn.seq = w.nextSeqLocked()
		w.subnets[sn.id] = sn
		out = sn.view()
		return nil
	})
	return out, err
}

func (w *World) vpcViewLocked(v *vpc) VPC {
	out := VPC{ID: v.id, DefaultSecurityGroup: v.defaultGroup, Tags: maps.Clone(v.tags)}
	for _, c := range v.cidrs {
		out.CIDRs = append(out.CIDRs, c.String())
	}
	for g, in := range w.groups {
		if in == v.id {
			out.SecurityGroups = append(out.SecurityGroups, g)
		}
	}
	slices.Sort(out.SecurityGroups)
	return out
}

// addGroupsLocked makes groups exist in the VPC vpcID. A group already in
// it is left as it is; one of another VPC is refused, as a group belongs
// to one VPC.
func (w *World) addGroupsLocked(vpcID string, groups []string) error {
	for _, g := range groups {
		if !ValidID(PrefixSG, g) {
			return errorf("InvalidSecurityGroupID.Malformed", "Invalid id: %q (expecting \"sg-...\")", shorten(g))
		}
		if in, ok := w.groups[g]; ok && in != vpcID {
			return errorf(CodeInvalidParameterValue, "security group %s is in %s, not %s", g, in, vpcID)
		}
	}
	for _, g := range groups {
		w.groups[g] = vpcID
		w.ids[g] = true
	}
	return nil
}

func (s *subnet) view() Subnet {
	return Subnet{
		ID: s.id, VPCID: s.vpcID, AvailabilityZone: s.az, CIDR: s.pool.cidr.String(),
		AvailableIPs: s.pool.free, Usable: int(s.pool.size) - ReservedPerSubnet, Tags: maps.Clone(s.tags),
	}
}

// VPCs returns every VPC in creation order.
func (w *World) VPCs() []VPC {
	w.mu.Lock()
	defer w.mu.Unlock()
	vs := slices.SortedFunc(maps.Values(w.vpcs), func(a, b *vpc) int { return cmpSeq(a.seq, b.seq) })
	out := make([]VPC, len(vs))
	for i, v := range vs {
		out[i] = w.vpcViewLocked(v)
	}
	return out
}

// Subnets returns every subnet in creation order.
func (w *World) Subnets() []Subnet {
	w.mu.Lock()
	defer w.mu.Unlock()
	ss := slices.SortedFunc(maps.Values(w.subnets), func(a, b *subnet) int { return cmpSeq(a.seq, b.seq) })
	out := make([]Subnet, len(ss))
	for i, s := range ss {
		out[i] = s.view()
	}
	return out
}

// Subnet returns one subnet.
func (w *World) Subnet(id string) (Subnet, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.subnets[id]
	if !ok {
		return Subnet{}, false
	}
	return s.view(), true
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
