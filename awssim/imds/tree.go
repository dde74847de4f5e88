package imds

import (
	"sort"
	"strconv"
	"strings"
)

// node is one entry of the metadata tree: a leaf with a value, or a directory.
// The tree is rebuilt from the Source on every request, so what a client sees
// is always the Source's current view, and listings can never disagree with
// the leaves they list.
type node struct {
	value    string
	children map[string]*node // nil for a leaf
}

func dir() *node { return &node{children: map[string]*node{}} }

// set stores a leaf at a slash-separated path, creating directories on the
// way. Empty values are not stored: IMDS omits what an instance doesn't have
// and answers 404 for it, which clients rely on to tell "none" from "".
func (n *node) set(path, value string) {
	if value == "" {
		return
	}
	parts := strings.Split(path, "/")
	cur := n
	for _, p := range parts[:len(parts)-1] {
		next, ok := cur.children[p]
		if !ok {
			next = dir()
			cur.children[p] = next
		}
		cur = next
	}
	cur.children[parts[len(parts)-1]] = &node{value: value}
}

// setList stores a newline-separated list, as IMDS serves lists.
func (n *node) setList(path string, values []string) {
	n.set(path, strings.Join(values, "\n"))
}

// lookup finds the node at path; a trailing slash is ignored, as IMDS does.
func (n *node) lookup(path string) (*node, bool) {
	path = strings.Trim(path, "/")
	if path == "" {
		return n, true
	}
	cur := n
	for _, p := range strings.Split(path, "/") {
		if cur.children == nil {
			return nil, false
		}
		next, ok := cur.children[p]
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// body is what IMDS answers for a node: the value of a leaf, or the sorted
// listing of a directory with subdirectories marked by a trailing slash.
func (n *node) body() string {
	if n.children == nil {
		return n.value
	}
	names := make([]string, 0, len(n.children))
	for name, c := range n.children {
		if c.children != nil {
			name += "/"
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, "\n")
}

// metaDataTree builds /latest/meta-data/ for md.
func metaDataTree(md Metadata) *node {
	root := dir()
	root.set("instance-id", md.InstanceID)
	root.set("instance-type", md.InstanceType)
	root.set("placement/availability-zone", md.AvailabilityZone)
	root.set("placement/region", regionOf(md.AvailabilityZone))
	root.set("mac", md.MAC)
	root.set("local-ipv4", md.LocalIPv4)
	for _, ifc := range md.Interfaces {
		if ifc.MAC == "" {
			continue
		}
		p := "network/interfaces/macs/" + ifc.MAC + "/"
		root.set(p+"mac", ifc.MAC)
		root.set(p+"interface-id", ifc.ENIID)
		root.set(p+"device-number", strconv.Itoa(ifc.DeviceNumber))
		root.set(p+"subnet-id", ifc.SubnetID)
		root.set(p+"subnet-ipv4-cidr-block", ifc.SubnetCIDR)
		root.set(p+"vpc-id", ifc.VPCID)
		if len(ifc.VPCCIDRs) > 0 {
			// vpc-ipv4-cidr-block is the VPC's primary CIDR; the plural
			// lists all of them, primary first.
			root.set(p+"vpc-ipv4-cidr-block", ifc.VPCCIDRs[0])
		}
		root.setList(p+"vpc-ipv4-cidr-blocks", ifc.VPCCIDRs)
		root.setList(p+"security-group-ids", ifc.SecurityGroupIDs)
		root.setList(p+"local-ipv4s", ifc.LocalIPv4s)
		root.setList(p+"ipv4-prefix", ifc.IPv4Prefixes)
	}
	return root
}

// regionOf derives the region from an availability zone name such as
// us-east-1a.
func regionOf(az string) string {
	if len(az) < 2 {
		return ""
	}
	last := az[len(az)-1]
	if last < 'a' || last > 'z' {
		return az
	}
	return az[:len(az)-1]
}
