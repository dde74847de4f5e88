package pool

import (
	"fmt"
	"net/netip"

	"github.com/allotnet/allot/agent/checkpoint"
)

// Holding an address back.
//
// A DEL can be answered once the release is durable, before the kernel has
// finished removing the old pod's veth (deleting a link waits out an RCU
// grace period, tens of milliseconds). Until that removal is done the
// address is still routed to the old veth, so Release frees the address in
// the records — the release is what the checkpoint holds, and a restart
// finds it free — but holds it back in memory: it is handed to no ADD and
// agreed to no broker release, and the pool's view shows it cooling, until
// the caller's unhold says the teardown is done. A crash in between loses
// the hold with the process; the restarted agent holds back (HoldBack) the
// addresses that veths no record accounts for still route.

// Release is Del for a caller that tears the pod's network down after the
// release is durable: the freed address is held back until unhold is
// called (once; later calls do nothing). An unknown key is not an error
// (found is false, unhold nil).
func (p *Pool) Release(key Key) (al Allocation, found bool, unhold func(), err error) {
	al, found, unhold, err = p.del(key, true)
	if err != nil {
		return al, found, nil, fmt.Errorf("release: %w", err)
	}
	return al, found, unhold, nil
}

// HoldBack holds back addr, a pool address no attachment holds, until
// unhold is called: the host still routes it to a veth no record accounts
// for. ok is false (and nothing is held) if addr is not the pool's, is
// assigned, or is held back already.
func (p *Pool) HoldBack(addr netip.Addr) (unhold func(), ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, known := p.addrs[addr]
	if !known || a.state == checkpoint.Assigned || p.heldBack[addr] {
		return nil, false
	}
	p.heldBack[addr] = true
	return p.unholdFunc(addr), true
}

// unholdFunc returns the func that ends addr's hold.
func (p *Pool) unholdFunc(addr netip.Addr) func() {
	done := false
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if done {
			return
		}
		done = true
		delete(p.heldBack, addr)
		if p.pending > 0 {
			p.wakeLocked()
		}
		p.notify()
	}
}

// HeldBack returns how many freed addresses are held back now.
func (p *Pool) HeldBack() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.heldBack)
}

// viewStateLocked is the state the pool's view shows for a: a free address
// held back is not available yet, so it shows as cooling.
func (p *Pool) viewStateLocked(a *addrRec) checkpoint.AddressState {
	if a.state == checkpoint.Free && p.heldBack[a.addr] {
		return checkpoint.Cooling
	}
	return a.state
}
