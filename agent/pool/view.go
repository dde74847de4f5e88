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
	s := Stats{ENIs: len(p.enis)}
	type pkey struct {
		eni    string
		prefix netip.Prefix
	}
	type pstat struct{ assigned, releasing bool }
	var prefixes map[pkey]pstat
	for _, a := range p.addrs {
		state := p.viewStateLocked(a)
		if a.prefix.IsValid() {
			if prefixes == nil {
				prefixes = map[pkey]pstat{}
			}
			k := pkey{a.eni, a.prefix}
			ps := prefixes[k]
			ps.assigned = ps.assigned || state == checkpoint.Assigned
			ps.releasing = ps.releasing || state == checkpoint.Releasing
			prefixes[k] = ps
		}
		switch state {
		case checkpoint.Releasing:
			s.Releasing++
			continue
		case checkpoint.Assigned:
			s.Assigned++
		case checkpoint.Cooling:
			s.Cooling++
		}
		s.Total++
	}
	for _, ps := range prefixes {
		if ps.releasing {
			continue
		}
		s.Prefixes++
		if !ps.assigned {
			s.FreePrefixes++
		}
	}
	return s
}

// StatsOf counts a pool view.
func StatsOf(enis []ENIView) Stats {
	var s Stats
	for _, e := range enis {
		s = s.plus(eniStats(e))
	}
	return s
}

func (s Stats) plus(o Stats) Stats {
	return Stats{
		ENIs: s.ENIs + o.ENIs, Total: s.Total + o.Total, Assigned: s.Assigned + o.Assigned,
		Cooling: s.Cooling + o.Cooling, Releasing: s.Releasing + o.Releasing,
		Prefixes: s.Prefixes + o.Prefixes, FreePrefixes: s.FreePrefixes + o.FreePrefixes,
	}
}

func eniStats(e ENIView) Stats {
	s := Stats{ENIs: 1}
	type pstat struct{ assigned, releasing bool }
	prefixes := map[netip.Prefix]*pstat{}
	for _, a := range e.Addrs {
		if a.Prefix.IsValid() {
			p := prefixes[a.Prefix]
			if p == nil {
				p = &pstat{}
				prefixes[a.Prefix] = p
			}
			p.assigned = p.assigned || a.State == checkpoint.Assigned
			p.releasing = p.releasing || a.State == checkpoint.Releasing
		}
		switch a.State {
		case checkpoint.Releasing:
			s.Releasing++
			continue
		case checkpoint.Assigned:
			s.Assigned++
		case checkpoint.Cooling:
			s.Cooling++
		}
		s.Total++
	}
	for _, p := range prefixes {
		if p.releasing {
			continue
		}
		s.Prefixes++
		if !p.assigned {
			s.FreePrefixes++
		}
	}
	return s
}
