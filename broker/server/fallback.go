package server

import (
	"time"

	"github.com/allotnet/allot/broker/podnet"
	"github.com/allotnet/allot/broker/store"
)

// nodeMode is the node's address mode as allotctl spells it.
func nodeMode(n store.Node) string {
	if n.PrefixMode() {
		return store.ModePrefix
	}
	return store.ModeSecondaryIP
}

// prefixFallback says, for a prefix-mode node, which of its subnets can't
// give a /28 now and what the node gets instead, as the engine plans it
// (podnet.NoPrefix over the same records); "" when none or not in prefix
// mode. The primary ENI counts only when no pod network moves the node's
// pods off it.
func prefixFallback(nets []store.PodNetwork, n store.Node, enis []store.ENI, subnets map[string]store.Subnet, now time.Time) string {
	if !n.PrefixMode() {
		return ""
	}
	pl := podnet.Place(nets, n, subnets)
	var in []string
	for _, x := range enis {
		if x.Primary && pl.Network != "" {
			continue
		}
		in = append(in, x.SubnetID)
	}
	return podnet.NoPrefix(pl, in, subnets, now).Message(subnets)
}

func subnetsByID(subnets []store.Subnet) map[string]store.Subnet {
	m := make(map[string]store.Subnet, len(subnets))
	for _, s := range subnets {
		m[s.ID] = s
	}
	return m
}
