package podnet

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/allotnet/allot/broker/store"
)

// Fallback is how a prefix-mode node is served while some of its subnets
// can't give a /28: EC2 answered InsufficientCidrBlocks there (the free
// addresses are scattered), and the engine remembers that for a while
// (store.Subnet.NoPrefixUntil) rather than asking for a prefix again on
// every round. It is per subnet: the node's other subnets keep prefix
// mode.
type Fallback struct {
	// Subnets are the node's subnets (where its new ENIs may go and where
	// its ENIs are) with no free /28 now, sorted.
	Subnets []string
	// Prefix are the subnets its new ENIs may use that can still give
	// prefixes; new ENIs go only there while there is one.
	Prefix []string
	// Secondary is true when none is left: the node gets secondary
	// addresses, on new ENIs and existing ones, until a subnet recovers.
	Secondary bool
}

// NoPrefix returns the fallback of a prefix-mode node placed at p whose
// ENIs are in eniSubnets, at now; the zero Fallback when none of its
// subnets lacks a /28.
func NoPrefix(p Placement, eniSubnets []string, subnets map[string]store.Subnet, now time.Time) Fallback {
	var f Fallback
	for _, id := range p.Subnets {
		if subnets[id].NoPrefix(now) {
			f.Subnets = append(f.Subnets, id)
		} else {
			f.Prefix = append(f.Prefix, id)
		}
	}
	for _, id := range eniSubnets {
		if subnets[id].NoPrefix(now) {
			f.Subnets = append(f.Subnets, id)
		}
	}
	if len(f.Subnets) == 0 {
		return Fallback{}
	}
	slices.Sort(f.Subnets)
	f.Subnets = slices.Compact(f.Subnets)
	f.Secondary = len(f.Prefix) == 0
	return f
}

// Active reports whether any of the node's subnets lacks a /28.
func (f Fallback) Active() bool { return len(f.Subnets) > 0 }

// Message says what the fallback does to the node, for its status: the
// subnets, until when, EC2's answer and what the node gets instead.
func (f Fallback) Message(subnets map[string]store.Subnet) string {
	if !f.Active() {
		return ""
	}
	parts := make([]string, 0, len(f.Subnets))
	for _, id := range f.Subnets {
		sn := subnets[id]
		parts = append(parts, fmt.Sprintf("%s until %s (%s)", id, sn.NoPrefixUntil.UTC().Format(time.RFC3339), sn.NoPrefixReason))
	}
	what := "the node gets secondary IP addresses instead of prefixes"
	if !f.Secondary {
		what = fmt.Sprintf("its ENIs there take no more prefixes; new ENIs go to %s", strings.Join(f.Prefix, ", "))
	}
	return fmt.Sprintf("prefix mode: no free /28 in %s; %s", strings.Join(parts, "; "), what)
}
