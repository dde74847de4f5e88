package burst

import (
	"math"
	"time"

	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/agent/pool"
	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/bench/lowerbound"
	"github.com/allotnet/allot/broker/planner"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// burstDemand is one node's whole burst demand as if known at once: the
// pods the warm pool can't serve, and what the warm targets ask for once
// every pod holds an address.
func burstDemand(mode daemon.Mode, l pool.Limits, pods int, have pool.Stats) (pending, warm int) {
	t := pool.DefaultTargets(mode == daemon.ModePrefix)
	pending = max(pods-have.Available(), 0)
	after := have
	if t.PrefixMode {
		// Waiting pods are served in whole prefixes.
		add := (pending + allotv1.PrefixSize - 1) / allotv1.PrefixSize
		after.Prefixes += add
		after.Total += add * allotv1.PrefixSize
		used := (pods + allotv1.PrefixSize - 1) / allotv1.PrefixSize
		after.FreePrefixes = max(after.Prefixes-used, 0)
	} else {
		after.Total += pending
	}
	after.Assigned = pods
	return pending, pool.Shortfall(t, l, after)
}

// subnetsOf maps each instance to its subnet, as idealPlan takes them.
func subnetsOf(insts []awssim.AdminInstance) map[string]string {
	out := make(map[string]string, len(insts))
	for _, in := range insts {
		out[in.ID] = in.SubnetID
	}
	return out
}

// idealPlan is the planner's plan for the whole burst at once: every node's
// ENIs as EC2 holds them when the burst starts and its whole burst demand
// (with the warm top-up after it, or only the pods). Its calls are the
// fewest the burst can take; lowerbound.LowerBound of the pods' plan is the
// floor the completion time is measured against.
func idealPlan(mode daemon.Mode, pl planner.Limits, pods int, insts map[string]string, enis []world.NetworkInterface, warm bool) planner.Plan {
	nodes, budgets := idealNodes(mode, pl, pods, insts, enis, warm)
	return planner.Make(nodes, budgets)
}

// idealNodes is the planner's view of every node at the start of the
// burst, with its whole burst demand, and budgets that never run out.
func idealNodes(mode daemon.Mode, pl planner.Limits, pods int, insts map[string]string, enis []world.NetworkInterface, warm bool) ([]planner.Node, planner.Budgets) {
	pm := planner.SecondaryIP
	if mode == daemon.ModePrefix {
		pm = planner.Prefix
	}
	l := pool.Limits{MaxENIs: pl.MaxENIs, IPv4PerENI: pl.IPv4PerENI}
	byNode := map[string][]world.NetworkInterface{}
	for _, e := range enis {
		if e.Attachment != nil {
			byNode[e.Attachment.InstanceID] = append(byNode[e.Attachment.InstanceID], e)
		}
	}
	var nodes []planner.Node
	budgets := planner.Budgets{}
	for id, subnet := range insts {
		// The agents run at their default warm targets, which count ENIs:
		// the broker creates new ENIs full for them (FillNewENIs).
		n := planner.Node{InstanceID: id, SubnetID: subnet, Mode: pm, Limits: pl, FillNewENIs: true}
		var have pool.Stats
		for _, e := range byNode[id] {
			n.ENIs = append(n.ENIs, planner.ENI{
				ID: e.ID, DeviceIndex: e.Attachment.DeviceIndex, SubnetID: e.SubnetID,
				Primary: e.Attachment.DeviceIndex == 0, Secondary: len(e.SecondaryIPs), Prefixes: len(e.Prefixes),
			})
			have.ENIs++
			have.Total += allotv1.PodAddresses(len(e.SecondaryIPs), len(e.Prefixes))
			have.Prefixes += len(e.Prefixes)
			have.FreePrefixes += len(e.Prefixes)
		}
		n.Pending, n.WarmShortfall = burstDemand(mode, l, pods, have)
		if !warm {
			n.WarmShortfall = 0
		}
		nodes = append(nodes, n)
		budgets[subnet] = math.MaxInt32
	}
	return nodes, budgets
}

// lowerBound is the bucket model's floor for calls, in simulated time.
func lowerBound(calls map[string]int, share float64) time.Duration {
	return lowerbound.LowerBound(calls, share, 1)
}
