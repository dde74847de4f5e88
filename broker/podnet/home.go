package podnet

import (
	"slices"

	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
)

// Home returns the subnet where node n's next ENI goes, and so its next
// pods: of the subnets its placement allows, the one with the most budget
// left (the planner's rule); its own subnet when no network selects it or
// the network leaves it none.
func Home(networks []store.PodNetwork, n store.Node, subnets map[string]store.Subnet) string {
	p := Place(networks, n, subnets)
	if len(p.Subnets) == 0 {
		return n.SubnetID
	}
	room := make(map[string]int64, len(p.Subnets))
	for _, id := range p.Subnets {
		room[id] = subnets[id].Available()
	}
	return planner.MostRoom(p.Subnets, room)
}

// AtHome returns the nodes with SubnetID set to their Home, for figures
// that count a node in the subnet its pods go to. A node whose network
// leaves out its own subnet also gets MaxENIs one less: its primary ENI
// takes no pod addresses then (the engine closes it, as aws-vpc-cni's
// custom networking does), so its pod slots are those of its other ENIs.
// With no pod network it returns nodes as they are.
func AtHome(networks []store.PodNetwork, nodes []store.Node, subnets []store.Subnet) []store.Node {
	if len(networks) == 0 {
		return nodes
	}
	byID := make(map[string]store.Subnet, len(subnets))
	for _, s := range subnets {
		byID[s.ID] = s
	}
	out := make([]store.Node, len(nodes))
	for i, n := range nodes {
		if p := Place(networks, n, byID); p.Network != "" && !slices.Contains(p.Subnets, n.SubnetID) && n.MaxENIs > 0 {
			n.MaxENIs--
		}
		n.SubnetID = Home(networks, n, byID)
		out[i] = n
	}
	return out
}
