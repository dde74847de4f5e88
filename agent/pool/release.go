package pool

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/allotnet/allot/agent/checkpoint"
)

// Ack is the part of a release proposal the agent agrees to.
type Ack struct {
	Addresses []netip.Addr
	Prefixes  []netip.Prefix
}

// Empty reports whether nothing was agreed.
func (a Ack) Empty() bool { return len(a.Addresses) == 0 && len(a.Prefixes) == 0 }

// ProposeRelease takes the broker's proposal to release addresses and
// prefixes and agrees to those that are free right now: not assigned, not
// cooling, known to the pool (an address the pool doesn't know is not
// evidence it is unused), and for a prefix, all 16 of its addresses. Agreed
// addresses become releasing — never handed out again — and that is
// persisted before ProposeRelease returns, so the ack can be sent safely.
// Proposing the same release again agrees to the same addresses.
func (p *Pool) ProposeRelease(id string, addrs []netip.Addr, prefixes []netip.Prefix) (Ack, error) {
	if id == "" {
		return Ack{}, fmt.Errorf("propose release: empty release id")
	}
	unlock := p.lockExclusive()
	defer unlock()
	p.expireLocked(p.cfg.Clock.Now())
	agreeable := func(a *addrRec) bool {
		return (a.state == checkpoint.Free && !p.heldBack[a.addr]) || (a.state == checkpoint.Releasing && a.releaseID == id)
	}
	var ack Ack
	var marked []*addrRec
	for _, ip := range addrs {
		a, ok := p.addrs[ip]
		// A single address of a prefix can't be unassigned from EC2 on
		// its own; only whole prefixes are.
		if !ok || a.prefix.IsValid() || !agreeable(a) || slices.Contains(ack.Addresses, ip) {
			continue
		}
		ack.Addresses = append(ack.Addresses, ip)
		marked = append(marked, a)
	}
	for _, pf := range prefixes {
		pf = pf.Masked()
		if slices.Contains(ack.Prefixes, pf) {
			continue
		}
		var members []*addrRec
		whole := pf.Bits() == 28
		for a := pf.Addr(); whole && pf.Contains(a); a = a.Next() {
			r, ok := p.addrs[a]
			if !ok || r.prefix != pf || !agreeable(r) {
				whole = false
				break
			}
			members = append(members, r)
		}
		if !whole {
			continue
		}
		ack.Prefixes = append(ack.Prefixes, pf)
		marked = append(marked, members...)
	}
	type was struct {
		state checkpoint.AddressState
		id    string
	}
	prev := make([]was, len(marked))
	for i, a := range marked {
		prev[i] = was{a.state, a.releaseID}
		a.state, a.releaseID = checkpoint.Releasing, id
	}
	if len(marked) == 0 {
		return ack, nil
	}
	err := p.commitLocked(func() {
		for i, a := range marked {
			a.state, a.releaseID = prev[i].state, prev[i].id
		}
	})
	if err != nil {
		return Ack{}, fmt.Errorf("propose release %s: %w", id, err)
	}
	p.log.Info("release agreed", "release", id, "addresses", len(ack.Addresses), "prefixes", len(ack.Prefixes))
	return ack, nil
}

// CancelRelease returns the addresses of a release the broker withdrew (or
// that failed) to the free pool, and wakes waiting ADDs.
func (p *Pool) CancelRelease(id string) (int, error) {
	return p.endRelease(id, false)
}

// CompleteRelease drops the addresses of a release the broker has carried
// out: they are no longer the node's.
func (p *Pool) CompleteRelease(id string) (int, error) {
	return p.endRelease(id, true)
}

func (p *Pool) endRelease(id string, done bool) (int, error) {
	unlock := p.lockExclusive()
	defer unlock()
	var hit []*addrRec
	for _, a := range p.addrs {
		if a.state == checkpoint.Releasing && a.releaseID == id {
			hit = append(hit, a)
		}
	}
	if len(hit) == 0 {
		return 0, nil
	}
	for _, a := range hit {
		if done {
			delete(p.addrs, a.addr)
		} else {
			a.state, a.releaseID, a.coolUntil = checkpoint.Free, "", time.Time{}
		}
	}
	err := p.commitLocked(func() {
		for _, a := range hit {
			a.state, a.releaseID = checkpoint.Releasing, id
			p.addrs[a.addr] = a
		}
	})
	if err != nil {
		return 0, fmt.Errorf("end release %s: %w", id, err)
	}
	if !done {
		p.wakeLocked()
	}
	return len(hit), nil
}

// Releases returns the IDs of releases the pool has agreed to and not yet
// seen completed or cancelled, so the agent can match them against the
// broker's open proposals after a restart.
func (p *Pool) Releases() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for _, a := range p.addrs {
		if a.state == checkpoint.Releasing && !slices.Contains(ids, a.releaseID) {
			ids = append(ids, a.releaseID)
		}
	}
	slices.Sort(ids)
	return ids
}
