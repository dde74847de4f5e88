package planner

// newENISubnet chooses the subnet for a new ENI of node n: among the subnets the node may use (Node.Subnets, or its own
// SubnetID when it lists none), the one whose budget has the most room left
// in this plan, ties to the lowest ID. Room is the budget's (SubnetBudget
// available: the subnet's addresses less what others use, the headroom kept
// for them, the cluster's cap and what is attached or reserved), charged
// as the plan grants slots, so each new ENI of a round sees what the ones
// before it took and a node's ENIs spread over its subnets as they fill.
// When no subnet can pay for the ENI the roomiest is returned anyway and
// the caller's budget check refuses it.
func (p *planning) newENISubnet(n *Node) string {
	if len(n.Subnets) == 0 {
		return n.SubnetID
	}
	best := ""
	for _, id := range n.Subnets {
		if best == "" || p.budget[id] > p.budget[best] || (p.budget[id] == p.budget[best] && id < best) {
			best = id
		}
	}
	return best
}
