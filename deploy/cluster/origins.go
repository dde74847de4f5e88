package cluster

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/ratelimit"
)

// AddressOrigin says where a pod's address came from, as the EC2 API
// describes it: the ENI holding it, that ENI's subnet and security groups.
type AddressOrigin struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
	// NodeSubnet is the node's own (primary ENI's) subnet.
	NodeSubnet  string `json:"node_subnet"`
	Addr        string `json:"address"`
	ENI         string `json:"eni"`
	DeviceIndex int    `json:"device_index"`
	Subnet      string `json:"subnet"`
	// SubnetName is the subnet's Name tag; SubnetCIDR and Zone EC2's.
	SubnetName     string   `json:"subnet_name"`
	SubnetCIDR     string   `json:"subnet_cidr"`
	Zone           string   `json:"zone"`
	SecurityGroups []string `json:"security_groups"`
}

// EC2View is what the EC2 API says about the cluster's nodes: every ENI
// attached to one of them and every subnet, by ID.
type EC2View struct {
	ENIs    []ec2client.ENIInfo
	Subnets map[string]ec2client.SubnetInfo
}

// DescribeEC2 asks awssim's EC2 API, with the SDK client the broker uses,
// for the ENIs attached to every live node and for the subnets.
func (c *Cluster) DescribeEC2(ctx context.Context) (EC2View, error) {
	ec2c, err := ec2client.New(ctx, ec2client.Config{Region: "us-east-1", Endpoint: c.Sim.EC2Endpoint(),
		Limiter: ratelimit.New(ratelimit.Config{TimeScale: c.cfg.TimeScale})})
	if err != nil {
		return EC2View{}, err
	}
	v := EC2View{Subnets: map[string]ec2client.SubnetInfo{}}
	subnets, err := ec2c.DescribeSubnets(ctx, nil)
	if err != nil {
		return v, fmt.Errorf("describe subnets: %w", err)
	}
	for _, s := range subnets {
		v.Subnets[s.ID] = s
	}
	for _, n := range c.liveNodes() {
		enis, err := ec2c.DescribeENIs(ctx, ec2client.DescribeENIsInput{InstanceID: n.InstanceID})
		if err != nil {
			return v, fmt.Errorf("describe ENIs of %s: %w", n.InstanceID, err)
		}
		v.ENIs = append(v.ENIs, enis...)
	}
	return v, nil
}

// holder returns the ENI holding addr as a secondary address or in a
// delegated prefix.
func (v EC2View) holder(addr netip.Addr) (ec2client.ENIInfo, bool) {
	for _, e := range v.ENIs {
		for _, s := range e.Addresses {
			if a, err := netip.ParseAddr(s); err == nil && a == addr {
				return e, true
			}
		}
		for _, s := range e.Prefixes {
			if p, err := netip.ParsePrefix(s); err == nil && p.Contains(addr) {
				return e, true
			}
		}
	}
	return ec2client.ENIInfo{}, false
}

// Origins returns where each pod's address came from; a pod whose address
// no ENI of the nodes holds has an origin with no ENI.
func (c *Cluster) Origins(v EC2View, pods []*Pod) []AddressOrigin {
	out := make([]AddressOrigin, 0, len(pods))
	for _, p := range pods {
		o := AddressOrigin{Pod: p.Name, Node: p.Node.Name, NodeSubnet: p.Node.SubnetID, Addr: p.Addr.String()}
		if e, ok := v.holder(p.Addr); ok {
			sn := v.Subnets[e.SubnetID]
			o.ENI, o.DeviceIndex, o.Subnet, o.SecurityGroups = e.ID, e.DeviceIndex, e.SubnetID, sortedCopy(e.SecurityGroups)
			o.SubnetCIDR, o.Zone = sn.CIDR, sn.AZ
			if w, ok := c.Sim.World().Subnet(e.SubnetID); ok {
				o.SubnetName = w.Tags["Name"]
			}
		}
		out = append(out, o)
	}
	return out
}

// CustomNetworkingProblems checks EC2's view against the pod networks the
// harness set: every node's primary address is in the node CIDR; every pod
// address is in the pod CIDR, on a secondary ENI of its node, in a subnet
// of its zone's pod network (never the node's subnet) with that network's
// security groups; and every ENI allot created for a node is in such a
// subnet with those groups. It returns what disagrees.
func (c *Cluster) CustomNetworkingProblems(v EC2View, origins []AddressOrigin) []string {
	var out []string
	for _, n := range c.liveNodes() {
		if !vpcCIDR.Contains(n.PrimaryIP) {
			out = append(out, fmt.Sprintf("%s: primary address %s is outside the node CIDR %s", n.Name, n.PrimaryIP, vpcCIDR))
		}
	}
	for _, o := range origins {
		pn, ok := c.PodNetworkFor(c.zoneOf(o.NodeSubnet))
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: no pod network for the zone of %s", o.Pod, o.Node))
		case o.ENI == "":
			out = append(out, fmt.Sprintf("%s: no ENI of the nodes holds %s", o.Pod, o.Addr))
		case !podCIDR.Contains(netip.MustParseAddr(o.Addr)):
			out = append(out, fmt.Sprintf("%s: %s is outside the pod CIDR %s (subnet %s)", o.Pod, o.Addr, podCIDR, o.Subnet))
		case o.Subnet == o.NodeSubnet || o.DeviceIndex == 0:
			out = append(out, fmt.Sprintf("%s: %s is on %s (device %d) in the node's subnet %s", o.Pod, o.Addr, o.ENI, o.DeviceIndex, o.Subnet))
		case !slices.Contains(pn.Subnets, o.Subnet):
			out = append(out, fmt.Sprintf("%s: %s is in %s, not a subnet of pod network %s %v", o.Pod, o.Addr, o.Subnet, pn.Name, pn.Subnets))
		case !slices.Equal(o.SecurityGroups, sortedCopy(pn.SecurityGroups)):
			out = append(out, fmt.Sprintf("%s: ENI %s has groups %v, pod network %s gives %v", o.Pod, o.ENI, o.SecurityGroups, pn.Name, pn.SecurityGroups))
		}
	}
	return append(out, c.ownENIProblems(v)...)
}

// ownENIProblems checks every ENI allot created (tagged with the cluster)
// against its node's pod network.
func (c *Cluster) ownENIProblems(v EC2View) []string {
	var out []string
	for _, e := range v.ENIs {
		if e.Tags[ec2client.TagCluster] != c.Prefix {
			continue
		}
		n := c.Node(e.InstanceID)
		if n == nil {
			out = append(out, fmt.Sprintf("ENI %s is attached to %s, not a node of the cluster", e.ID, e.InstanceID))
			continue
		}
		pn, _ := c.PodNetworkFor(c.zoneOf(n.SubnetID))
		if !slices.Contains(pn.Subnets, e.SubnetID) {
			out = append(out, fmt.Sprintf("ENI %s of %s is in %s, not a subnet of pod network %s %v", e.ID, n.Name, e.SubnetID, pn.Name, pn.Subnets))
		}
		if !slices.Equal(sortedCopy(e.SecurityGroups), sortedCopy(pn.SecurityGroups)) {
			out = append(out, fmt.Sprintf("ENI %s of %s has groups %v, pod network %s gives %v", e.ID, n.Name, e.SecurityGroups, pn.Name, pn.SecurityGroups))
		}
	}
	return out
}

// zoneOf is a subnet's zone in awssim.
func (c *Cluster) zoneOf(subnetID string) string {
	sn, _ := c.Sim.World().Subnet(subnetID)
	return sn.AvailabilityZone
}

// CrossSubnetPairs counts the pairs whose two pods' addresses are in
// different subnets.
func CrossSubnetPairs(pairs [][2]*Pod, origins []AddressOrigin) int {
	subnet := map[string]string{}
	for _, o := range origins {
		subnet[o.Pod] = o.Subnet
	}
	n := 0
	for _, p := range pairs {
		if a, b := subnet[p[0].Name], subnet[p[1].Name]; a != "" && b != "" && a != b {
			n++
		}
	}
	return n
}

// writeOrigins prints where each pod's address came from.
func writeOrigins(w io.Writer, origins []AddressOrigin) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tNODE\tNODE SUBNET\tADDRESS\tENI\tDEVICE\tSUBNET\tCIDR\tZONE\tSECURITY GROUPS")
	for _, o := range origins {
		name := o.Subnet
		if o.SubnetName != "" {
			name = o.SubnetName + " " + o.Subnet
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", o.Pod, o.Node, o.NodeSubnet, o.Addr, o.ENI, o.DeviceIndex,
			name, o.SubnetCIDR, o.Zone, strings.Join(o.SecurityGroups, ","))
	}
	_ = tw.Flush()
}
