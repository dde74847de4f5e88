package executor

import (
	"context"
	"slices"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/podnet"
	"github.com/allotnet/allot/broker/store"
)

// NoPrefixFor is how long a subnet where EC2 found no free /28 is left out
// of prefix requests; its prefix-mode nodes get secondary addresses there
// meanwhile. Addresses freed in the subnet may leave whole /28s again, so
// it is tried again after a while rather than never.
const NoPrefixFor = 10 * time.Minute

// place sets where the node's new ENIs may go and with which security
// groups: its pod network's subnets in its zone, or its own subnet. The
// planner puts each new ENI in the one with the most budget left. It
// returns why the node can have no new ENI, or "".
//
// Under a pod network the node's primary ENI takes no pod addresses unless
// its subnet is one of the network's (aws-vpc-cni's custom networking does
// the same): pods belong in the network's subnets. Other ENIs keep the
// subnet they were made in; a change of network moves only new ENIs.
func place(snap *snapshot, n store.Node, pn *planner.Node, now time.Time) string {
	pl := podnet.Place(snap.podnets, n, snap.subnets)
	if why := pl.Problem(); why != "" {
		return why
	}
	pn.Subnets, pn.SecurityGroups = pl.Subnets, pl.SecurityGroups
	if pl.Network != "" {
		for i := range pn.ENIs {
			if pn.ENIs[i].Primary && !slices.Contains(pl.Subnets, pn.ENIs[i].SubnetID) {
				pn.ENIs[i].Closed = true
			}
		}
	}
	if pn.Mode == planner.Prefix && pn.Limits.PrefixCapable {
		avoidNoPrefix(pn, podnet.NoPrefix(pl, eniSubnets(pn.ENIs), snap.subnets, now))
	}
	return ""
}

// avoidNoPrefix adapts a prefix-mode node to its subnets that can't give a
// /28 now: new ENIs go only to subnets that can and its ENIs in the others
// take nothing more, or, when no subnet for new ENIs can, the node is
// planned in secondary-IP mode.
func avoidNoPrefix(pn *planner.Node, f podnet.Fallback) {
	if !f.Active() {
		return
	}
	if f.Secondary {
		pn.Mode = planner.SecondaryIP
		return
	}
	pn.Subnets = f.Prefix
	for i := range pn.ENIs {
		if slices.Contains(f.Subnets, pn.ENIs[i].SubnetID) {
			pn.ENIs[i].Closed = true
		}
	}
}

func eniSubnets(enis []planner.ENI) []string {
	out := make([]string, 0, len(enis))
	for _, x := range enis {
		out = append(out, x.SubnetID)
	}
	return out
}

// noteNoPrefix records, when a prefix request failed because the subnet
// has no free /28, that the subnet gives prefix-mode nodes secondary
// addresses for NoPrefixFor, and logs it once with EC2's answer.
func (e *Engine) noteNoPrefix(ctx context.Context, subnetID string, prefix bool, err error) {
	if !prefix || ec2client.Code(err) != ec2client.CodeInsufficientCidrBlocks || ctx.Err() != nil {
		return
	}
	until := e.cfg.Clock.Now().Add(NoPrefixFor)
	if _, serr := e.st.SetNoPrefix(ctx, subnetID, until, err.Error()); serr != nil {
		e.log.Warn("recording that a subnet has no free /28", "subnet", subnetID, "err", serr)
		return
	}
	e.log.Warn("subnet has no free /28: prefix-mode nodes get secondary addresses there", "subnet", subnetID,
		"until", until.UTC().Format(time.RFC3339), "reason", err)
}

// budgetSubnet names the subnet a node's budget shortfall is reported
// against: of the subnets its new ENIs may use, the one with the most
// left (the planner's first choice, refused too).
func budgetSubnet(pn planner.Node, snap *snapshot) string {
	best := pn.SubnetID
	for i, id := range pn.Subnets {
		if i == 0 || snap.subnets[id].Available() > snap.subnets[best].Available() {
			best = id
		}
	}
	return best
}
