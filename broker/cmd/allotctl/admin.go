package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

type nodeRow struct {
	InstanceID          string `json:"instance_id"`
	NodeName            string `json:"node_name"`
	InstanceType        string `json:"instance_type"`
	AvailabilityZone    string `json:"availability_zone"`
	SubnetID            string `json:"subnet_id"`
	ENIs                int32  `json:"enis"`
	MaxENIs             int32  `json:"max_enis"`
	Attached            int32  `json:"attached"`
	Assigned            int32  `json:"assigned"`
	Warm                int32  `json:"warm"`
	Pending             int32  `json:"pending"`
	WarmShortfall       int32  `json:"warm_shortfall"`
	Alive               bool   `json:"alive"`
	OperationInProgress bool   `json:"operation_in_progress"`
	UnmetReason         string `json:"unmet_reason,omitempty"`
	UnmetMessage        string `json:"unmet_message,omitempty"`
	Mode                string `json:"mode,omitempty"`
	PrefixFallback      string `json:"prefix_fallback,omitempty"`
}

// modeColumn is the node's mode, marked when some of its subnets can't
// give it a /28 now (the JSON output says which and what it gets instead).
func (r nodeRow) modeColumn() string {
	if r.PrefixFallback != "" {
		return r.Mode + " (no /28)"
	}
	return dash(r.Mode)
}

func cmdNodes(ctx context.Context, c *client, args []string, o *options, out io.Writer) error {
	if err := wantArgs(args, 0, "no arguments"); err != nil {
		return err
	}
	resp, err := c.admin.ListNodes(ctx, &allotv1.ListNodesRequest{})
	if err != nil {
		return err
	}
	rows := make([]nodeRow, 0, len(resp.GetNodes()))
	for _, n := range resp.GetNodes() {
		rows = append(rows, nodeRow{
			InstanceID: n.GetInstanceId(), NodeName: n.GetNodeName(), InstanceType: n.GetInstanceType(), AvailabilityZone: n.GetAvailabilityZone(),
			SubnetID: n.GetSubnetId(), ENIs: n.GetEnis(), MaxENIs: n.GetMaxEnis(), Attached: n.GetAttached(),
			Assigned: n.GetAssigned(), Warm: n.GetWarm(), Pending: n.GetPending(), WarmShortfall: n.GetWarmShortfall(),
			Alive: n.GetAlive(), OperationInProgress: n.GetOperationInProgress(),
			UnmetReason: n.GetUnmetReason(), UnmetMessage: n.GetUnmetMessage(),
			Mode: n.GetMode(), PrefixFallback: n.GetPrefixFallback(),
		})
	}
	if o.output == "json" {
		return writeJSON(out, rows)
	}
	t := newTable(out, "INSTANCE", "NODE", "TYPE", "AZ", "SUBNET", "MODE", "ENIS", "ATTACHED", "ASSIGNED", "WARM",
		"PENDING", "SHORTFALL", "ALIVE", "EC2-OP", "UNMET")
	for _, r := range rows {
		t.row(r.InstanceID, dash(r.NodeName), r.InstanceType, r.AvailabilityZone, r.SubnetID, r.modeColumn(), fmt.Sprintf("%d/%d", r.ENIs, r.MaxENIs),
			r.Attached, r.Assigned, r.Warm, r.Pending, r.WarmShortfall, yesNo(r.Alive), yesNo(r.OperationInProgress), dash(r.UnmetReason))
	}
	return t.flush()
}

type eniRow struct {
	InstanceID  string   `json:"instance_id"`
	ENIID       string   `json:"eni_id"`
	Status      string   `json:"status"`
	DeviceIndex int32    `json:"device_index"`
	Primary     bool     `json:"primary"`
	SubnetID    string   `json:"subnet_id"`
	SubnetCIDR  string   `json:"subnet_cidr"`
	MAC         string   `json:"mac"`
	PrimaryIP   string   `json:"primary_ip"`
	Addresses   []string `json:"addresses"`
	Prefixes    []string `json:"prefixes"`
}

// eniNode is the value of `enis --node`.
var eniNode string

func eniFlags(fs *flag.FlagSet) {
	fs.StringVar(&eniNode, "node", "", "only this instance's ENIs")
}

func cmdENIs(ctx context.Context, c *client, args []string, o *options, out io.Writer) error {
	if err := wantArgs(args, 0, "no arguments (use --node for one node)"); err != nil {
		return err
	}
	resp, err := c.admin.ListENIs(ctx, &allotv1.ListENIsRequest{InstanceId: eniNode})
	if err != nil {
		return err
	}
	rows := make([]eniRow, 0, len(resp.GetEnis()))
	for _, ne := range resp.GetEnis() {
		e := ne.GetEni()
		rows = append(rows, eniRow{
			InstanceID: ne.GetInstanceId(), ENIID: e.GetEniId(), Status: ne.GetStatus(), DeviceIndex: e.GetDeviceIndex(),
			Primary: e.GetPrimary(), SubnetID: e.GetSubnetId(), SubnetCIDR: e.GetSubnetCidr(), MAC: e.GetMac(),
			PrimaryIP: e.GetPrimaryIp(), Addresses: nonNil(e.GetAddresses()), Prefixes: nonNil(e.GetPrefixes()),
		})
	}
	if o.output == "json" {
		return writeJSON(out, rows)
	}
	t := newTable(out, "INSTANCE", "ENI", "DEV", "STATUS", "SUBNET", "MAC", "PRIMARY-IP", "ADDRS", "PREFIXES")
	for _, r := range rows {
		dev := fmt.Sprint(r.DeviceIndex)
		if r.Primary {
			dev += "*"
		}
		t.row(r.InstanceID, r.ENIID, dev, r.Status, r.SubnetID, r.MAC, r.PrimaryIP, len(r.Addresses),
			strings.Join(r.Prefixes, ","))
	}
	return t.flush()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type statusRow struct {
	Leader                       string `json:"leader"`
	Nodes                        int32  `json:"nodes"`
	MaxAddresses                 int64  `json:"max_addresses"`
	Attached                     int64  `json:"attached"`
	Assigned                     int64  `json:"assigned"`
	NodesWithOperationInProgress int32  `json:"nodes_with_operation_in_progress"`
	OpenIntents                  int32  `json:"open_intents"`
}

func cmdStatus(ctx context.Context, c *client, args []string, o *options, out io.Writer) error {
	if err := wantArgs(args, 0, "no arguments"); err != nil {
		return err
	}
	s, err := c.admin.GetStatus(ctx, &allotv1.GetStatusRequest{})
	if err != nil {
		return err
	}
	r := statusRow{
		Leader: s.GetLeader(), Nodes: s.GetNodes(), MaxAddresses: s.GetMaxAddresses(), Attached: s.GetAttached(),
		Assigned: s.GetAssigned(), NodesWithOperationInProgress: s.GetNodesWithOperationInProgress(),
		OpenIntents: s.GetOpenIntents(),
	}
	if o.output == "json" {
		return writeJSON(out, r)
	}
	leader := r.Leader
	if leader == "" {
		leader = "(none)"
	}
	t := newTable(out, "FIELD", "VALUE")
	t.row("leader", leader)
	t.row("nodes", r.Nodes)
	t.row("max addresses", r.MaxAddresses)
	t.row("attached", r.Attached)
	t.row("assigned to pods", r.Assigned)
	t.row("nodes with EC2 operation in progress", r.NodesWithOperationInProgress)
	t.row("open intents", r.OpenIntents)
	return t.flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
