package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// budgetRow is one subnet in `-o json`; numbers stay numbers (protojson
// would quote every int64).
type budgetRow struct {
	SubnetID         string `json:"subnet_id"`
	CIDR             string `json:"cidr"`
	AvailabilityZone string `json:"availability_zone"`
	Usable           int64  `json:"usable"`
	Headroom         int64  `json:"headroom"`
	Cap              int64  `json:"cap"`
	Limit            int64  `json:"limit"`
	Attached         int64  `json:"attached"`
	Assigned         int64  `json:"assigned"`
	Warm             int64  `json:"warm"`
	Reserved         int64  `json:"reserved"`
	UsedByOthers     int64  `json:"used_by_others"`
	Available        int64  `json:"available"`
	HeadroomPods     int64  `json:"headroom_pods"`
	Revision         int64  `json:"revision"`
	// Pods counts the nodes' limits too, and says which binds.
	Pods podsRow `json:"pods"`
}

func toBudgetRow(b *allotv1.SubnetBudget) budgetRow {
	return budgetRow{
		SubnetID: b.GetSubnetId(), CIDR: b.GetCidr(), AvailabilityZone: b.GetAvailabilityZone(),
		Usable: b.GetUsable(), Headroom: b.GetHeadroom(), Cap: b.GetCap(), Limit: b.GetLimit(),
		Attached: b.GetAttached(), Assigned: b.GetAssigned(), Warm: b.GetWarm(), Reserved: b.GetReserved(),
		UsedByOthers: b.GetUsedByOthers(), Available: b.GetAvailable(), HeadroomPods: b.GetHeadroomPods(),
		Revision: b.GetRevision(), Pods: toPodsRow(b.GetPods()),
	}
}

func printBudgets(out io.Writer, o *options, bs []*allotv1.SubnetBudget) error {
	rows := make([]budgetRow, 0, len(bs))
	for _, b := range bs {
		rows = append(rows, toBudgetRow(b))
	}
	if o.output == "json" {
		return writeJSON(out, rows)
	}
	t := newTable(out, "SUBNET", "CIDR", "AZ", "LIMIT", "ATTACHED", "ASSIGNED", "WARM", "RESERVED",
		"OTHERS", "AVAILABLE", "PODS", "HEADROOM", "CAP", "NODE-PODS", "FIT", "BINDS")
	for _, r := range rows {
		capText := "-"
		if r.Cap > 0 {
			capText = fmt.Sprint(r.Cap)
		}
		t.row(r.SubnetID, r.CIDR, r.AvailabilityZone, r.Limit, r.Attached, r.Assigned, r.Warm, r.Reserved,
			r.UsedByOthers, r.Available, r.HeadroomPods, r.Headroom, capText, r.Pods.NodePods, r.Pods.Pods, r.Pods.Binding)
	}
	return t.flush()
}

// Values of `budget set` flags; -1 leaves the current value.
var setHeadroom, setCap int64

func budgetFlags(fs *flag.FlagSet) {
	fs.Int64Var(&setHeadroom, "headroom", -1, "addresses kept free for others in the account (budget set)")
	fs.Int64Var(&setCap, "cap", -1, "most addresses this cluster may hold, 0 for no cap (budget set)")
}

func cmdBudget(ctx context.Context, c *client, args []string, o *options, out io.Writer) error {
	if len(args) == 0 {
		return usageError{"want get <subnet-id> or set <subnet-id> --headroom N --cap N"}
	}
	verb, args := args[0], args[1:]
	if err := wantArgs(args, 1, "one subnet ID"); err != nil {
		return err
	}
	cur, err := c.budget.GetSubnetBudget(ctx, &allotv1.GetSubnetBudgetRequest{SubnetId: args[0]})
	if err != nil {
		return err
	}
	switch verb {
	case "get":
	case "set":
		if setHeadroom < 0 && setCap < 0 {
			return usageError{"set needs --headroom, --cap or both"}
		}
		req := &allotv1.SetSubnetBudgetRequest{SubnetId: args[0], Headroom: cur.GetHeadroom(), Cap: cur.GetCap()}
		if setHeadroom >= 0 {
			req.Headroom = setHeadroom
		}
		if setCap >= 0 {
			req.Cap = setCap
		}
		if cur, err = c.budget.SetSubnetBudget(ctx, req); err != nil {
			return err
		}
	default:
		return usageError{fmt.Sprintf("unknown budget verb %q (want get or set)", verb)}
	}
	return printBudgets(out, o, []*allotv1.SubnetBudget{cur})
}
