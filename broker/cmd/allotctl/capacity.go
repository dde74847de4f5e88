package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Values of the `budgets` and `max-pods` flags.
var (
	budgetsBy    string
	budgetsWatch bool
	maxPodsType  string
	maxPodsMode  string
)

func budgetsFlags(fs *flag.FlagSet) {
	fs.StringVar(&budgetsBy, "by", "subnet", "subnet, az or cluster: one row per subnet, per availability zone, or the cluster's total")
	fs.BoolVar(&budgetsWatch, "watch", false, "keep printing as figures change (until interrupted)")
}

func maxPodsFlags(fs *flag.FlagSet) {
	fs.StringVar(&maxPodsType, "instance-type", "", "EC2 instance type, e.g. m5.large")
	fs.StringVar(&maxPodsMode, "mode", "secondary-ip", "address mode: secondary-ip or prefix")
}

// podsRow is a PodHeadroom in `-o json`.
type podsRow struct {
	Pods        int64  `json:"pods"`
	AddressPods int64  `json:"address_pods"`
	NodePods    int64  `json:"node_pods"`
	Binding     string `json:"binding"`
	Nodes       int64  `json:"nodes"`
}

func toPodsRow(p *allotv1.PodHeadroom) podsRow {
	return podsRow{Pods: p.GetPods(), AddressPods: p.GetAddressPods(), NodePods: p.GetNodePods(), Binding: p.GetBinding(), Nodes: p.GetNodes()}
}

// totalRow is a zone's or the cluster's total in `-o json`.
type totalRow struct {
	AvailabilityZone string  `json:"availability_zone,omitempty"`
	Subnets          int64   `json:"subnets"`
	Usable           int64   `json:"usable"`
	Limit            int64   `json:"limit"`
	Attached         int64   `json:"attached"`
	Assigned         int64   `json:"assigned"`
	Warm             int64   `json:"warm"`
	Reserved         int64   `json:"reserved"`
	UsedByOthers     int64   `json:"used_by_others"`
	Headroom         int64   `json:"headroom"`
	Available        int64   `json:"available"`
	HeadroomPods     int64   `json:"headroom_pods"`
	Pods             podsRow `json:"pods"`
}

func toTotalRow(t *allotv1.CapacityTotal) totalRow {
	return totalRow{
		AvailabilityZone: t.GetAvailabilityZone(), Subnets: t.GetSubnets(), Usable: t.GetUsable(), Limit: t.GetLimit(),
		Attached: t.GetAttached(), Assigned: t.GetAssigned(), Warm: t.GetWarm(), Reserved: t.GetReserved(),
		UsedByOthers: t.GetUsedByOthers(), Headroom: t.GetHeadroom(), Available: t.GetAvailable(),
		HeadroomPods: t.GetHeadroomPods(), Pods: toPodsRow(t.GetPods()),
	}
}

func printTotals(out io.Writer, o *options, ts []*allotv1.CapacityTotal) error {
	rows := make([]totalRow, 0, len(ts))
	for _, t := range ts {
		rows = append(rows, toTotalRow(t))
	}
	if o.output == "json" {
		return writeJSON(out, rows)
	}
	t := newTable(out, "AZ", "SUBNETS", "LIMIT", "ATTACHED", "ASSIGNED", "WARM", "RESERVED", "OTHERS", "AVAILABLE",
		"ADDR-PODS", "NODE-PODS", "FIT", "BINDS")
	for _, r := range rows {
		az := r.AvailabilityZone
		if az == "" {
			az = "(cluster)"
		}
		t.row(az, r.Subnets, r.Limit, r.Attached, r.Assigned, r.Warm, r.Reserved, r.UsedByOthers, r.Available,
			r.Pods.AddressPods, r.Pods.NodePods, r.Pods.Pods, r.Pods.Binding)
	}
	return t.flush()
}

// printCapacity prints one answer grouped as --by says.
func printCapacity(out io.Writer, o *options, resp *allotv1.GetCapacityResponse) error {
	switch budgetsBy {
	case "az":
		return printTotals(out, o, resp.GetZones())
	case "cluster":
		return printTotals(out, o, []*allotv1.CapacityTotal{resp.GetCluster()})
	}
	return printBudgets(out, o, resp.GetSubnets())
}

func cmdBudgets(ctx context.Context, c *client, args []string, o *options, out io.Writer) error {
	if err := wantArgs(args, 0, "no arguments"); err != nil {
		return err
	}
	if budgetsBy != "subnet" && budgetsBy != "az" && budgetsBy != "cluster" {
		return usageError{fmt.Sprintf("--by %q: want subnet, az or cluster", budgetsBy)}
	}
	if !budgetsWatch {
		resp, err := c.budget.GetCapacity(ctx, &allotv1.GetCapacityRequest{})
		if err != nil {
			return err
		}
		return printCapacity(out, o, resp)
	}
	// A watch runs until interrupted, not until the command's deadline.
	ctx = context.WithoutCancel(ctx)
	stream, err := c.budget.WatchSubnetBudgets(ctx, &allotv1.WatchSubnetBudgetsRequest{})
	if err != nil {
		return err
	}
	for {
		b, err := stream.Recv()
		if err != nil {
			return err
		}
		if budgetsBy == "subnet" {
			if err := printBudgets(out, o, []*allotv1.SubnetBudget{b}); err != nil {
				return err
			}
			continue
		}
		resp, err := c.budget.GetCapacity(ctx, &allotv1.GetCapacityRequest{})
		if err != nil {
			return err
		}
		if err := printCapacity(out, o, resp); err != nil {
			return err
		}
	}
}

// maxPodsRow is `max-pods -o json`.
type maxPodsRow struct {
	InstanceType string `json:"instance_type"`
	Mode         string `json:"mode"`
	MaxPods      int64  `json:"max_pods"`
	MaxENIs      int32  `json:"max_enis"`
	IPv4PerENI   int32  `json:"ipv4_per_eni"`
	VCPUs        int32  `json:"vcpus"`
	Formula      string `json:"formula"`
}

func cmdMaxPods(ctx context.Context, c *client, args []string, o *options, out io.Writer) error {
	if err := wantArgs(args, 0, "no arguments (use --instance-type and --mode)"); err != nil {
		return err
	}
	if maxPodsType == "" {
		return usageError{"--instance-type is required"}
	}
	mode := allotv1.AddressMode_ADDRESS_MODE_SECONDARY_IP
	switch maxPodsMode {
	case "secondary-ip":
	case "prefix":
		mode = allotv1.AddressMode_ADDRESS_MODE_PREFIX
	default:
		return usageError{fmt.Sprintf("--mode %q: want secondary-ip or prefix", maxPodsMode)}
	}
	resp, err := c.budget.GetMaxPods(ctx, &allotv1.GetMaxPodsRequest{InstanceType: maxPodsType, Mode: mode})
	if err != nil {
		return err
	}
	r := maxPodsRow{InstanceType: resp.GetInstanceType(), Mode: maxPodsMode, MaxPods: resp.GetMaxPods(), MaxENIs: resp.GetMaxEnis(),
		IPv4PerENI: resp.GetIpv4PerEni(), VCPUs: resp.GetVcpus(), Formula: resp.GetFormula()}
	if o.output == "json" {
		return writeJSON(out, r)
	}
	_, err = fmt.Fprintf(out, "%d\n# %s %s: %s\n", r.MaxPods, r.InstanceType, r.Mode, r.Formula)
	return err
}
