package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/allotnet/allot/awssim/scenario"
)

// Custom networking puts pods in other subnets than their nodes, with
// other security groups, as aws-vpc-cni's ENIConfig does: the nodes sit in
// the VPC's primary CIDR and every new ENI goes into a subnet of a
// secondary CIDR. The layout is deploy/awssim/custom-networking.yaml's
// (a test keeps the two the same): nodes in 10.0.0.0/16, one subnet per
// zone; pods in 100.64.0.0/16, two subnets per zone tagged
// kubernetes.io/role/cni.
var (
	podCIDR       = netip.MustParsePrefix("100.64.0.0/16")
	cniSubnetTags = map[string]string{"kubernetes.io/role/cni": "1"}
	podSubnets    = []scenario.Subnet{
		{Name: "pods-a1", CIDR: "100.64.0.0/19", AZ: "us-east-1a", Tags: cniSubnetTags},
		{Name: "pods-a2", CIDR: "100.64.32.0/19", AZ: "us-east-1a", Tags: cniSubnetTags},
		{Name: "pods-b1", CIDR: "100.64.64.0/19", AZ: "us-east-1b", Tags: cniSubnetTags},
		{Name: "pods-b2", CIDR: "100.64.96.0/19", AZ: "us-east-1b", Tags: cniSubnetTags},
	}
	// podSecurityGroups are the groups each zone's pod network gives its
	// new ENIs; the nodes' primary ENIs keep the VPC's default group, so an
	// ENI carrying these was placed by the pod network.
	podSecurityGroups = map[string]string{
		"us-east-1a": "sg-0a11c0a0000000001",
		"us-east-1b": "sg-0a11c0b0000000001",
	}
)

// customNetworkingVPC is the VPC of a custom-networking cluster.
func customNetworkingVPC() scenario.VPC {
	return scenario.VPC{
		CIDRs:          []string{vpcCIDR.String(), podCIDR.String()},
		SecurityGroups: slices.Sorted(maps.Values(podSecurityGroups)),
		Tags:           map[string]string{"Name": "allot-custom-networking"},
		Subnets:        slices.Concat(subnets, podSubnets),
	}
}

// PodNetwork is one pod network the harness set through the broker's API:
// the nodes of Zone put their new ENIs into Subnets with SecurityGroups.
type PodNetwork struct {
	Name           string   `json:"name"`
	Zone           string   `json:"zone"`
	Subnets        []string `json:"subnets"`
	SecurityGroups []string `json:"security_groups"`
}

// setPodNetworks sets a pod network per zone through `allotctl
// pod-networks set` with the admin's certificate, as an operator would
// before the nodes join. Each network names its zone's pod subnets by ID.
func (c *Cluster) setPodNetworks(ctx context.Context) error {
	zones := map[string][]string{}
	for _, sn := range podSubnets {
		id, ok := scenario.SubnetID(c.Sim.World(), sn.Name)
		if !ok {
			return fmt.Errorf("pod subnet %s is not in awssim", sn.Name)
		}
		zones[sn.AZ] = append(zones[sn.AZ], id)
	}
	for _, zone := range sortedKeys(zones) {
		pn := PodNetwork{Name: "pods-" + zone, Zone: zone, Subnets: zones[zone], SecurityGroups: []string{podSecurityGroups[zone]}}
		if _, err := c.allotctl(ctx, true, "pod-networks", "set", pn.Name, "--az", zone,
			"--subnets", strings.Join(pn.Subnets, ","), "--security-groups", strings.Join(pn.SecurityGroups, ","),
			"--expected-revision", "-1"); err != nil {
			return err
		}
		c.PodNetworks = append(c.PodNetworks, pn)
		c.log.Info("pod network set", "name", pn.Name, "zone", zone, "subnets", pn.Subnets, "security_groups", pn.SecurityGroups)
	}
	return nil
}

// PodNetworkFor returns the pod network of a zone, if the harness set one.
func (c *Cluster) PodNetworkFor(zone string) (PodNetwork, bool) {
	for _, pn := range c.PodNetworks {
		if pn.Zone == zone {
			return pn, true
		}
	}
	return PodNetwork{}, false
}

// PodNetworksTable is `allotctl pod-networks list` as a planner sees it.
func (c *Cluster) PodNetworksTable(ctx context.Context) (string, error) {
	return c.allotctl(ctx, false, "pod-networks", "list")
}

// allotctl runs allotctl against the broker as a planner or, with admin,
// as an operator, and returns what it printed.
func (c *Cluster) allotctl(ctx context.Context, admin bool, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	creds := c.pki.ctlArgs()
	if admin {
		creds = c.pki.ctlAdminArgs()
	}
	cmd := exec.CommandContext(ctx, c.cfg.Binaries.Ctl, slices.Concat([]string{"--broker", c.Broker.Addr}, creds, args)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("allotctl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(out), nil
}

// addCustomNetworking records the pod networks and where every pod's
// address came from, as the EC2 API describes it at the peak, and checks
// them against the pod networks (CustomNetworkingProblems) and that the
// connectivity check's pairs cross pod subnets.
func (r *Report) addCustomNetworking(ctx context.Context, c *Cluster, pods []*Pod) {
	r.PodNetworks = c.PodNetworks
	var err error
	if r.PodNetworksTable, err = c.PodNetworksTable(ctx); err != nil {
		r.check("allotctl pod-networks list", false, "%v", err)
	}
	v, err := c.DescribeEC2(ctx)
	if err != nil {
		r.check("custom networking: EC2 describes the nodes' ENIs and the subnets", false, "%v", err)
		return
	}
	r.Origins = c.Origins(v, pods)
	problems := c.CustomNetworkingProblems(v, r.Origins)
	r.check("custom networking: nodes in "+vpcCIDR.String()+", every pod address in "+podCIDR.String()+
		" on an ENI in its zone's pod subnets with the pod network's security groups", len(problems) == 0 && len(pods) > 0,
		"%d pods, %d disagreements%s", len(pods), len(problems), failures(errorsOf(problems)))
	pairs := CrossNodePairs(pods)
	cross := CrossSubnetPairs(pairs, r.Origins)
	r.check("custom networking: pod-to-pod pairs cross pod subnets", cross > 0 || len(c.Nodes) < 2,
		"%d of %d pairs have their two pods in different subnets", cross, len(pairs))
	if len(pairs) > 0 {
		s := c.CheckSeenAsThemselves(ctx, pairs)
		r.check("custom networking: each pod of a pair sees the other's own address (no SNAT inside the VPC's CIDRs)", s.OK(),
			"%d/%d connections seen from the pod's own address%s", s.Tried-len(s.Failed), s.Tried, failures(s.Failed))
	}
}

func errorsOf(s []string) []error {
	out := make([]error, len(s))
	for i, m := range s {
		out[i] = errors.New(m)
	}
	return out
}

// writeCustomNetworking prints the pod networks and the address origins.
func (r *Report) writeCustomNetworking(w io.Writer) {
	if len(r.PodNetworks) == 0 {
		return
	}
	fmt.Fprintf(w, "\nallotctl pod-networks list (set before the nodes joined):\n%s", r.PodNetworksTable)
	fmt.Fprintf(w, "\nwhere each pod's address came from (EC2 DescribeNetworkInterfaces and DescribeSubnets):\n")
	writeOrigins(w, r.Origins)
}
