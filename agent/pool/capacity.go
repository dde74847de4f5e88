package pool

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/allotnet/allot/agent/checkpoint"
)

// AddENI records an ENI (or updates what is known of it). Its addresses
// come separately, through AddCapacity, once they are confirmed.
func (p *Pool) AddENI(e ENI) error {
	if e.ID == "" {
		return fmt.Errorf("add eni: empty id")
	}
	unlock := p.lockExclusive()
	defer unlock()
	old, ok := p.enis[e.ID]
	if ok && *old == e {
		return nil
	}
	n := e
	p.enis[e.ID] = &n
	return p.commitLocked(func() {
		if ok {
			p.enis[e.ID] = old
		} else {
			delete(p.enis, e.ID)
		}
	})
}

// AddCapacity adds confirmed addresses of an ENI to the pool as free and
// wakes waiting ADDs. Prefixes are expanded into their 16 addresses. It is
// idempotent: addresses already in the pool keep their state (a re-sent
// snapshot can't free an assigned address). The ENI's own primary address is
// never added. An address the pool has on another ENI is ErrConflict, and
// nothing is added.
func (p *Pool) AddCapacity(eniID string, addrs []netip.Addr, prefixes []netip.Prefix) (added int, err error) {
	unlock := p.lockExclusive()
	defer unlock()
	e, ok := p.enis[eniID]
	if !ok {
		return 0, fmt.Errorf("add capacity: %w: %s", ErrUnknownENI, eniID)
	}
	type cand struct {
		addr   netip.Addr
		prefix netip.Prefix
	}
	var cands []cand
	for _, a := range addrs {
		cands = append(cands, cand{addr: a})
	}
	for _, pf := range prefixes {
		pf = pf.Masked()
		if !pf.Addr().Is4() || pf.Bits() != 28 {
			return 0, fmt.Errorf("add capacity on %s: %s is not an IPv4 /28 prefix", eniID, pf)
		}
		for a := pf.Addr(); pf.Contains(a); a = a.Next() {
			cands = append(cands, cand{addr: a, prefix: pf})
		}
	}
	var fresh []*addrRec
	for _, c := range cands {
		if !c.addr.IsValid() || c.addr == e.PrimaryIP {
			continue
		}
		if cur, ok := p.addrs[c.addr]; ok {
			if cur.eni != eniID {
				return 0, fmt.Errorf("add capacity on %s: %w: %s is on %s", eniID, ErrConflict, c.addr, cur.eni)
			}
			continue
		}
		if slices.ContainsFunc(fresh, func(r *addrRec) bool { return r.addr == c.addr }) {
			continue
		}
		fresh = append(fresh, &addrRec{addr: c.addr, eni: eniID, prefix: c.prefix, state: checkpoint.Free})
	}
	if len(fresh) == 0 {
		return 0, nil
	}
	for _, r := range fresh {
		p.addrs[r.addr] = r
	}
	err = p.commitLocked(func() {
		for _, r := range fresh {
			delete(p.addrs, r.addr)
		}
	})
	if err != nil {
		return 0, fmt.Errorf("add capacity on %s: %w", eniID, err)
	}
	p.wakeLocked()
	p.log.Info("capacity added", "eni", eniID, "addresses", len(fresh))
	return len(fresh), nil
}

// Retain drops the ENI's unassigned addresses that are not in keep (the
// broker's record of the ENI, after a release completed or an address was
// taken back). Assigned addresses are never dropped: those missing from keep
// are returned as drift for the caller to report, since a pod still uses
// them.
func (p *Pool) Retain(eniID string, keepAddrs []netip.Addr, keepPrefixes []netip.Prefix) (dropped, drift []netip.Addr, err error) {
	unlock := p.lockExclusive()
	defer unlock()
	if _, ok := p.enis[eniID]; !ok {
		return nil, nil, fmt.Errorf("retain: %w: %s", ErrUnknownENI, eniID)
	}
	keep := map[netip.Addr]bool{}
	for _, a := range keepAddrs {
		keep[a] = true
	}
	inKept := func(a *addrRec) bool {
		if keep[a.addr] {
			return true
		}
		for _, pf := range keepPrefixes {
			if a.prefix.IsValid() && pf.Masked() == a.prefix {
				return true
			}
		}
		return false
	}
	var gone []*addrRec
	for _, a := range sortedAddrs(p.addrs) {
		if a.eni != eniID || inKept(a) {
			continue
		}
		if a.state == checkpoint.Assigned {
			drift = append(drift, a.addr)
			continue
		}
		gone = append(gone, a)
	}
	if len(gone) == 0 {
		return nil, drift, nil
	}
	for _, a := range gone {
		delete(p.addrs, a.addr)
		dropped = append(dropped, a.addr)
	}
	if err := p.commitLocked(func() {
		for _, a := range gone {
			p.addrs[a.addr] = a
		}
	}); err != nil {
		return nil, nil, fmt.Errorf("retain on %s: %w", eniID, err)
	}
	return dropped, drift, nil
}

// RemoveENI drops an ENI and its addresses from the pool, after the broker
// detached it. It refuses (ErrInUse) while any of its addresses is assigned
// or held back.
func (p *Pool) RemoveENI(id string) error {
	unlock := p.lockExclusive()
	defer unlock()
	e, ok := p.enis[id]
	if !ok {
		return nil
	}
	var gone []*addrRec
	for _, a := range p.addrs {
		if a.eni != id {
			continue
		}
		if a.state == checkpoint.Assigned {
			return fmt.Errorf("remove eni %s: %w: %s is held by %s", id, ErrInUse, a.addr, a.holder)
		}
		if p.heldBack[a.addr] {
			return fmt.Errorf("remove eni %s: %w: %s is still routed to a pod being torn down", id, ErrInUse, a.addr)
		}
		gone = append(gone, a)
	}
	delete(p.enis, id)
	for _, a := range gone {
		delete(p.addrs, a.addr)
	}
	return p.commitLocked(func() {
		p.enis[id] = e
		for _, a := range gone {
			p.addrs[a.addr] = a
		}
	})
}
