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
	return MostRoom(n.Subnets, p.budget)
}

// MostRoom returns the subnet of ids with the most room (ties: the lowest
// ID), "" for none: the rule that places every new ENI, also used to
// say where a node's next ENI goes outside a plan.
func MostRoom(ids []string, room map[string]int64) string {
	best := ""
	for _, id := range ids {
		if best == "" || room[id] > room[best] || (room[id] == room[best] && id < best) {
			best = id
		}
	}
	return best
}
