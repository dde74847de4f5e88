package pool

import (
	"net/netip"

	"github.com/allotnet/allot/agent/checkpoint"
)

// ENIView is the policy's read-only view of one ENI and its pool addresses.
type ENIView struct {
	ID          string
	DeviceIndex int
	Primary     bool
	Addrs       []AddrView
}

// AddrView is one pool address as the policy sees it.
type AddrView struct {
	Addr netip.Addr
	// Prefix is the /28 the address comes from; zero for a secondary IP.
	Prefix netip.Prefix
	State  checkpoint.AddressState
}

// statsLocked is StatsOf(p.viewLocked()) without building the views: the
// broker link asks for the demand after every change, and building the
// views sorted and copied every address of the node each time.
func (p *Pool) statsLocked() Stats {
	var c statsCounter
	for _, a := range p.addrs {
		c.add(a.eni, a.prefix, p.viewStateLocked(a))
	}
	return c.stats(len(p.enis))
}

// StatsOf counts a pool view.
func StatsOf(enis []ENIView) Stats {
	var c statsCounter
	for _, e := range enis {
		for _, a := range e.Addrs {
			c.add(e.ID, a.Prefix, a.State)
		}
	}
	return c.stats(len(enis))
}

// statsCounter counts addresses one at a time into Stats. An address
// being released is not counted in Total; a prefix counts if none of its
// addresses is being released, and is free if none is assigned either.
type statsCounter struct {
	s        Stats
	prefixes map[eniPrefix]prefixUse
}

type eniPrefix struct {
	eni    string
	prefix netip.Prefix
}

type prefixUse struct{ assigned, releasing bool }

func (c *statsCounter) add(eni string, prefix netip.Prefix, state checkpoint.AddressState) {
	if prefix.IsValid() {
		if c.prefixes == nil {
			c.prefixes = map[eniPrefix]prefixUse{}
		}
		k := eniPrefix{eni, prefix}
		u := c.prefixes[k]
		u.assigned = u.assigned || state == checkpoint.Assigned
		u.releasing = u.releasing || state == checkpoint.Releasing
		c.prefixes[k] = u
	}
	switch state {
	case checkpoint.Releasing:
		c.s.Releasing++
		return
	case checkpoint.Assigned:
		c.s.Assigned++
	case checkpoint.Cooling:
		c.s.Cooling++
	}
	c.s.Total++
}

// stats returns the counts, with enis ENIs.
func (c *statsCounter) stats(enis int) Stats {
	s := c.s
	s.ENIs = enis
	for _, u := range c.prefixes {
		if u.releasing {
			continue
		}
		s.Prefixes++
		if !u.assigned {
			s.FreePrefixes++
		}
	}
	return s
}
