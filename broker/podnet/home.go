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
// that count a node in the subnet its pods go to, and the primary ENIs
// that take no pod addresses, by ID. A node whose network leaves out its
// own subnet has its primary ENI closed (the engine adds nothing to it, as
// aws-vpc-cni's custom networking does): the node gets MaxENIs one less,
// so its pod slots are those of its other ENIs, and the primary's free
// slots are no room for pods in its subnet. With no pod network it
// returns nodes as they are and no closed primary.
func AtHome(networks []store.PodNetwork, nodes []store.Node, subnets []store.Subnet) ([]store.Node, map[string]bool) {
	if len(networks) == 0 {
		return nodes, nil
	}
	byID := make(map[string]store.Subnet, len(subnets))
	for _, s := range subnets {
		byID[s.ID] = s
	}
	out := make([]store.Node, len(nodes))
	closed := map[string]bool{}
	for i, n := range nodes {
		if p := Place(networks, n, byID); p.Network != "" && !slices.Contains(p.Subnets, n.SubnetID) {
			if n.MaxENIs > 0 {
				n.MaxENIs--
			}
			if n.PrimaryENIID != "" {
				closed[n.PrimaryENIID] = true
			}
		}
		n.SubnetID = Home(networks, n, byID)
		out[i] = n
	}
	return out, closed
}
