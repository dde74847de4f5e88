package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// podNetworkRow is one pod network in `-o json`.
type podNetworkRow struct {
	Name             string            `json:"name"`
	AvailabilityZone string            `json:"availability_zone,omitempty"`
	NodeGroup        string            `json:"node_group,omitempty"`
	InstanceTags     map[string]string `json:"instance_tags,omitempty"`
	SubnetIDs        []string          `json:"subnet_ids,omitempty"`
	SubnetTags       map[string]string `json:"subnet_tags,omitempty"`
	SecurityGroupIDs []string          `json:"security_group_ids,omitempty"`
	Discovered       []string          `json:"discovered_subnet_ids,omitempty"`
	Revision         int64             `json:"revision"`
}

func toPodNetworkRow(p *allotv1.PodNetwork) podNetworkRow {
	return podNetworkRow{
		Name: p.GetName(), AvailabilityZone: p.GetSelector().GetAvailabilityZone(), NodeGroup: p.GetSelector().GetNodeGroup(),
		InstanceTags: p.GetSelector().GetInstanceTags(), SubnetIDs: p.GetSubnetIds(), SubnetTags: p.GetSubnetTags(),
		SecurityGroupIDs: p.GetSecurityGroupIds(), Discovered: p.GetDiscoveredSubnetIds(), Revision: p.GetRevision(),
	}
}

// selectorText renders a selector as "az=us-east-1a,node-group=ng,tag:k=v";
// "*" for one that matches every node.
func selectorText(r podNetworkRow) string {
	var terms []string
	if r.AvailabilityZone != "" {
		terms = append(terms, "az="+r.AvailabilityZone)
	}
	if r.NodeGroup != "" {
		terms = append(terms, "node-group="+r.NodeGroup)
	}
	for _, k := range slices.Sorted(maps.Keys(r.InstanceTags)) {
		terms = append(terms, "tag:"+k+"="+r.InstanceTags[k])
	}
	if len(terms) == 0 {
		return "*"
	}
	return strings.Join(terms, ",")
}

func tagsText(m map[string]string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] == "" {
			out = append(out, k)
		} else {
			out = append(out, k+"="+m[k])
		}
	}
	return strings.Join(out, ",")
}

func printPodNetworks(out io.Writer, o *options, ps []*allotv1.PodNetwork) error {
	rows := make([]podNetworkRow, 0, len(ps))
	for _, p := range ps {
		rows = append(rows, toPodNetworkRow(p))
	}
	if o.output == "json" {
		return writeJSON(out, rows)
	}
	t := newTable(out, "NAME", "SELECTOR", "SUBNETS", "SUBNET-TAGS", "DISCOVERED", "SECURITY-GROUPS", "REVISION")
	for _, r := range rows {
		groups := strings.Join(r.SecurityGroupIDs, ",")
		if groups == "" {
			groups = "(node's)"
		}
		t.row(r.Name, selectorText(r), strings.Join(r.SubnetIDs, ","), tagsText(r.SubnetTags),
			strings.Join(r.Discovered, ","), groups, r.Revision)
	}
	return t.flush()
}

// pnFlags are the values of `pod-networks set`'s flags.
var pnFlags struct {
	az, nodeGroup, subnets, groups string
	instanceTags, subnetTags       tagList
	expectedRevision               int64
}

// tagList collects repeated key=value flags.
type tagList []string

func (t *tagList) String() string     { return strings.Join(*t, ",") }
func (t *tagList) Set(v string) error { *t = append(*t, v); return nil }

func podNetworkFlags(fs *flag.FlagSet) {
	fs.StringVar(&pnFlags.az, "az", "", "set: select nodes in this availability zone")
	fs.StringVar(&pnFlags.nodeGroup, "node-group", "", "set: select nodes of this node group (instance tag "+allotv1.NodeGroupTag+")")
	fs.Var(&pnFlags.instanceTags, "instance-tag", "set: select nodes whose instance has tag key=value (repeatable)")
	fs.StringVar(&pnFlags.subnets, "subnets", "", "set: comma-separated subnet IDs new ENIs may use")
	fs.Var(&pnFlags.subnetTags, "subnet-tag", "set: also use subnets with tag key=value, or key for any value (repeatable)")
	fs.StringVar(&pnFlags.groups, "security-groups", "", "set: comma-separated security group IDs of new ENIs (default: the node's)")
	fs.Int64Var(&pnFlags.expectedRevision, "expected-revision", 0, "set: only if the network is at this revision (-1: only if it does not exist)")
}

func cmdPodNetworks(ctx context.Context, c *client, args []string, o *options, out io.Writer) error {
	if len(args) == 0 {
		return usageError{"want list, get <name>, set <name> [flags] or delete <name>"}
	}
	verb, args := args[0], args[1:]
	switch verb {
	case "list":
		if err := wantArgs(args, 0, "no arguments"); err != nil {
			return err
		}
		resp, err := c.podnet.ListPodNetworks(ctx, &allotv1.ListPodNetworksRequest{})
		if err != nil {
			return err
		}
		return printPodNetworks(out, o, resp.GetNetworks())
	case "get", "delete", "set":
	default:
		return usageError{fmt.Sprintf("unknown pod-networks verb %q (want list, get, set or delete)", verb)}
	}
	if err := wantArgs(args, 1, "one pod network name"); err != nil {
		return err
	}
	var (
		pn  *allotv1.PodNetwork
		err error
	)
	switch verb {
	case "get":
		pn, err = c.podnet.GetPodNetwork(ctx, &allotv1.GetPodNetworkRequest{Name: args[0]})
	case "delete":
		if _, err = c.podnet.DeletePodNetwork(ctx, &allotv1.DeletePodNetworkRequest{Name: args[0]}); err == nil {
			_, err = fmt.Fprintf(out, "pod network %s deleted; ENIs already in its subnets stay there\n", args[0])
		}
		return err
	case "set":
		req, perr := podNetworkRequest(args[0])
		if perr != nil {
			return perr
		}
		pn, err = c.podnet.SetPodNetwork(ctx, req)
	}
	if err != nil {
		return err
	}
	return printPodNetworks(out, o, []*allotv1.PodNetwork{pn})
}

// podNetworkRequest builds `set`'s request from the flags.
func podNetworkRequest(name string) (*allotv1.SetPodNetworkRequest, error) {
	instanceTags, err := parseTags(pnFlags.instanceTags, false)
	if err != nil {
		return nil, err
	}
	subnetTags, err := parseTags(pnFlags.subnetTags, true)
	if err != nil {
		return nil, err
	}
	pn := &allotv1.PodNetwork{
		Name: name,
		Selector: &allotv1.NodeSelector{
			AvailabilityZone: pnFlags.az, NodeGroup: pnFlags.nodeGroup, InstanceTags: instanceTags,
		},
		SubnetIds: splitList(pnFlags.subnets), SubnetTags: subnetTags, SecurityGroupIds: splitList(pnFlags.groups),
	}
	if len(pn.SubnetIds) == 0 && len(pn.SubnetTags) == 0 {
		return nil, usageError{"set needs --subnets, --subnet-tag or both"}
	}
	return &allotv1.SetPodNetworkRequest{Network: pn, ExpectedRevision: pnFlags.expectedRevision}, nil
}

func parseTags(l tagList, bareKey bool) (map[string]string, error) {
	if len(l) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range l {
		k, v, ok := strings.Cut(kv, "=")
		if k == "" || (!ok && !bareKey) {
			return nil, usageError{fmt.Sprintf("tag %q: want key=value", kv)}
		}
		m[k] = v
	}
	return m, nil
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
