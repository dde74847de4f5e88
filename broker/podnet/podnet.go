// Package podnet decides which pod network a node's new ENIs follow and
// which subnets that leaves them. It is pure: the server uses it to check a
// pod network against the registered nodes before storing it, the engine
// to choose where a new ENI goes.
//
// A node selector matches when every term it sets matches: the zone, the
// node group (the instance tag eks:nodegroup-name) and each instance tag by
// exact value. Among the networks that match a node, the most specific
// wins (the most terms: zone 1, node group 1, each tag 1), then the name
// that sorts first. A node no network matches uses its own subnet and
// security groups.
package podnet

import (
	"fmt"
	"slices"
	"strings"

	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Matches says whether sel selects node n.
func Matches(sel store.NodeSelector, n store.Node) bool {
	if sel.AvailabilityZone != "" && sel.AvailabilityZone != n.AvailabilityZone {
		return false
	}
	if sel.NodeGroup != "" && n.Tags[allotv1.NodeGroupTag] != sel.NodeGroup {
		return false
	}
	for k, v := range sel.InstanceTags {
		if got, ok := n.Tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Specificity is the number of terms a selector sets.
func Specificity(sel store.NodeSelector) int {
	s := len(sel.InstanceTags)
	if sel.AvailabilityZone != "" {
		s++
	}
	if sel.NodeGroup != "" {
		s++
	}
	return s
}

// For returns the pod network node n follows, and false when none matches.
func For(networks []store.PodNetwork, n store.Node) (store.PodNetwork, bool) {
	var best store.PodNetwork
	found := false
	for _, pn := range networks {
		if !Matches(pn.Selector, n) {
			continue
		}
		if !found || better(pn, best) {
			best, found = pn, true
		}
	}
	return best, found
}

func better(a, b store.PodNetwork) bool {
	if sa, sb := Specificity(a.Selector), Specificity(b.Selector); sa != sb {
		return sa > sb
	}
	return a.Name < b.Name
}

// Placement is where a node's new ENIs go.
type Placement struct {
	// Network is the pod network's name; empty for the node's own subnet.
	Network string
	// Subnets are the subnets new ENIs may use: in the node's zone and VPC,
	// with a record, sorted.
	Subnets []string
	// SecurityGroups are the new ENIs' groups.
	SecurityGroups []string
	// Refused says, per subnet of the network the node may not use, why
	// (another zone, another VPC, not yet recorded), for the node's status.
	Refused []string
}

// Place returns where node n's new ENIs go given the pod networks and the
// subnet records. A subnet of the network outside the node's zone or VPC
// is never offered: EC2 would create the ENI and then refuse to attach it,
// and the engine would create the next one.
func Place(networks []store.PodNetwork, n store.Node, subnets map[string]store.Subnet) Placement {
	pn, ok := For(networks, n)
	if !ok {
		return Placement{Subnets: []string{n.SubnetID}, SecurityGroups: slices.Clone(n.SecurityGroups)}
	}
	p := Placement{Network: pn.Name, SecurityGroups: slices.Clone(pn.SecurityGroups)}
	if len(p.SecurityGroups) == 0 {
		p.SecurityGroups = slices.Clone(n.SecurityGroups)
	}
	for _, id := range pn.Subnets() {
		if why := Unusable(subnets, id, n); why != "" {
			p.Refused = append(p.Refused, why)
			continue
		}
		p.Subnets = append(p.Subnets, id)
	}
	return p
}

// Unusable says why node n may not put an ENI in subnet id, or "" if it
// may.
func Unusable(subnets map[string]store.Subnet, id string, n store.Node) string {
	sn, ok := subnets[id]
	switch {
	case !ok:
		return fmt.Sprintf("%s: not yet recorded", id)
	case sn.AvailabilityZone != n.AvailabilityZone:
		return fmt.Sprintf("%s: in zone %s, the node is in %s", id, sn.AvailabilityZone, n.AvailabilityZone)
	case n.VPCID != "" && sn.VPCID != "" && sn.VPCID != n.VPCID:
		return fmt.Sprintf("%s: in %s, the node is in %s", id, sn.VPCID, n.VPCID)
	}
	return ""
}

// Problem says what is wrong with a placement that leaves the node no
// subnet, for its status.
func (p Placement) Problem() string {
	if len(p.Subnets) > 0 {
		return ""
	}
	return fmt.Sprintf("pod network %s has no subnet this node may use (%s)", p.Network, strings.Join(p.Refused, "; "))
}
