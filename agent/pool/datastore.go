package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/allotnet/allot/agent/checkpoint"
)

// Add gives the attachment key an address and records it durably before
// returning. It is idempotent: the same key always gets the same address
// back, so an ADD retried after a crash or timeout resolves cleanly. When no
// address is free, Add waits — for capacity (AddCapacity), a cancelled
// release or a cooldown ending — until ctx ends or Config.MaxWait passes, and
// then fails with ErrNoAddress. While it waits it counts in Demand.Pending.
func (p *Pool) Add(ctx context.Context, key Key, info PodInfo) (Allocation, error) {
	al, _, err := p.add(ctx, key, info, nil)
	return al, err
}

// AddWiring is Add for a caller that wires the pod while the allocation is
// being written. A new allocation is sent on assigned (which must have
// room for one) as soon as it is made in memory, and AddWiring then waits
// for its write. If that write fails, the caller may be routing the address
// to the pod by then, so it is not freed at once: it is held back — handed
// to no ADD, agreed to no release — until unhold (non-nil only then) is
// called, which the caller does once what it wired is gone. An allocation
// the attachment already had is durable and is not sent.
func (p *Pool) AddWiring(ctx context.Context, key Key, info PodInfo, assigned chan<- Allocation) (al Allocation, unhold func(), err error) {
	return p.add(ctx, key, info, assigned)
}

func (p *Pool) add(ctx context.Context, key Key, info PodInfo, assigned chan<- Allocation) (Allocation, func(), error) {
	if key.ContainerID == "" || key.IfName == "" {
		return Allocation{}, nil, fmt.Errorf("%w: %q", ErrInvalidKey, key.String())
	}
	if p.cfg.MaxWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.MaxWait)
		defer cancel()
	}
	// Counted as arriving until it holds an address or gives up; told to
	// the reporters now, before the lock, which other ADDs' checkpoint
	// writes may hold for a while.
	w := &addWait{p: p}
	p.arriving.Add(1)
	p.retried()
	defer w.served()
	p.notify()
	p.mu.Lock()
	defer func() {
		w.stopWaiting()
		p.mu.Unlock()
	}()
	for {
		// A change of this key in flight (a concurrent ADD of it, or a
		// DEL) is waited out, so what is found below is durable.
		p.waitTurnLocked(claim{key: key})
		if al, ok := p.allocs[key]; ok {
			w.served()
			return *al, nil, nil
		}
		now := p.cfg.Clock.Now()
		p.expireLocked(now)
		if a := p.pickLocked(); a != nil {
			// It holds an address from here: neither arriving nor
			// pending while its write is in flight.
			w.served()
			w.stopWaiting()
			return p.assignLocked(key, info, a, now, assigned)
		}
		w.startWaiting()
		if err := p.sleepLocked(ctx, now); err != nil {
			return Allocation{}, nil, fmt.Errorf("add %s: %w: %w", key, ErrNoAddress, err)
		}
	}
}

// addWait is one ADD's place in the demand: arriving until it holds an
// address or gives up, and pending while it waits for one. p.mu guards
// waiting.
type addWait struct {
	p       *Pool
	arrived bool
	waiting bool
}

func (w *addWait) served() {
	if !w.arrived {
		w.arrived = true
		w.p.arriving.Add(-1)
	}
}

func (w *addWait) startWaiting() {
	if !w.waiting {
		w.waiting = true
		w.p.pending++
		w.p.signalLocked()
	}
}

func (w *addWait) stopWaiting() {
	if w.waiting {
		w.waiting = false
		w.p.pending--
		w.p.signalLocked()
	}
}

// assignLocked gives a to key and persists it; on a failed write nothing
// changed, except that with assigned set (AddWiring) the address is held
// back until the returned unhold is called.
func (p *Pool) assignLocked(key Key, info PodInfo, a *addrRec, now time.Time, assigned chan<- Allocation) (Allocation, func(), error) {
	al := &Allocation{Key: key, PodInfo: info, Addr: a.addr, ENIID: a.eni, Created: now}
	a.state, a.holder = checkpoint.Assigned, key
	p.allocs[key] = al
	sent := false
	if assigned != nil {
		select {
		case assigned <- *al:
			sent = true
		default:
		}
	}
	err := p.commitLocked(func() {
		a.state, a.holder = checkpoint.Free, Key{}
		delete(p.allocs, key)
		if sent {
			p.heldBack[a.addr] = true
		}
	}, claim{key: key, addr: a.addr})
	if err != nil {
		var unhold func()
		if sent {
			unhold = p.unholdFunc(a.addr)
		}
		return Allocation{}, unhold, fmt.Errorf("add %s: %w", key, err)
	}
	p.log.Debug("address assigned", "attachment", key.String(), "addr", a.addr, "eni", a.eni)
	return *al, nil, nil
}

// sleepLocked releases p.mu until something may have freed an address
// (capacity added, a release cancelled, a cooldown ended) and takes it
// again. It returns ctx's error once ctx ends, recording the ADD as given
// up.
func (p *Pool) sleepLocked(ctx context.Context, now time.Time) error {
	wake := p.wake
	var cooled <-chan time.Time
	if next, ok := p.nextCoolLocked(); ok {
		cooled = p.cfg.Clock.After(next.Sub(now))
	}
	p.mu.Unlock()
	defer p.mu.Lock()
	select {
	case <-wake:
	case <-cooled:
	case <-ctx.Done():
		p.giveUp()
		return ctx.Err()
	}
	return nil
}

// signalLocked tells reporters something changed without persisting (the
// pending count lives in memory only: waiting ADDs die with the process).
func (p *Pool) signalLocked() { p.notify() }

// notify gives the reporters a token; it needs no lock.
func (p *Pool) notify() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// pickLocked chooses a free address, packing: it prefers the prefix (or,
// for secondary IPs, the ENI) with the most addresses already assigned, so
// whole prefixes and ENIs stay free to be released; then the lowest device
// index; then the lowest address. An address a DEL in flight freed is not
// free yet: the DEL's write may fail and give it back to its holder; nor is
// one held back while its old pod's network is torn down.
func (p *Pool) pickLocked() *addrRec {
	used := map[string]int{}
	group := func(a *addrRec) string {
		if a.prefix.IsValid() {
			return a.prefix.String()
		}
		return "eni:" + a.eni
	}
	for _, a := range p.addrs {
		if a.state == checkpoint.Assigned {
			used[group(a)]++
		}
	}
	var best *addrRec
	better := func(a, b *addrRec) bool {
		if ua, ub := used[group(a)], used[group(b)]; ua != ub {
			return ua > ub
		}
		if da, db := p.enis[a.eni].DeviceIndex, p.enis[b.eni].DeviceIndex; da != db {
			return da < db
		}
		return a.addr.Less(b.addr)
	}
	for _, a := range p.addrs {
		if a.state != checkpoint.Free || p.claimedAddrs[a.addr] || p.heldBack[a.addr] {
			continue
		}
		if best == nil || better(a, best) {
			best = a
		}
	}
	return best
}

// nextCoolLocked returns when the next cooling address becomes free.
func (p *Pool) nextCoolLocked() (time.Time, bool) {
	var next time.Time
	for _, a := range p.addrs {
		if a.state == checkpoint.Cooling && (next.IsZero() || a.coolUntil.Before(next)) {
			next = a.coolUntil
		}
	}
	return next, !next.IsZero()
}

// Del frees the attachment's address, durably, and returns the allocation
// it removed so the caller knows what it held. The address cools down before
// reuse. Del is idempotent: an unknown key is not an error (found is
// false). Because keys carry the container ID, a DEL for an old sandbox
// never touches a newer attachment of the same pod. Callers tear the pod's
// network down before calling Del, so a freed address is never still routed
// to the old pod; Release is for callers that tear it down after.
func (p *Pool) Del(key Key) (al Allocation, found bool, err error) {
	al, found, _, err = p.del(key, false)
	return al, found, err
}

// del is Del; with hold set the freed address is also held back
// (holdback.go) until the returned unhold runs.
func (p *Pool) del(key Key, hold bool) (al Allocation, found bool, unhold func(), err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waitTurnLocked(claim{key: key})
	cur, ok := p.allocs[key]
	if !ok {
		return Allocation{}, false, nil, nil
	}
	a := p.addrs[cur.Addr]
	now := p.cfg.Clock.Now()
	delete(p.allocs, key)
	a.holder = Key{}
	freed := p.cfg.Cooldown <= 0
	if freed {
		a.state = checkpoint.Free
	} else {
		a.state, a.coolUntil = checkpoint.Cooling, now.Add(p.cfg.Cooldown)
	}
	if hold {
		p.heldBack[a.addr] = true
	}
	coolUntil := a.coolUntil
	err = p.commitLocked(func() {
		p.allocs[key] = cur
		a.state, a.coolUntil, a.holder = checkpoint.Assigned, time.Time{}, key
		delete(p.heldBack, a.addr)
	}, claim{key: key, addr: a.addr})
	if err != nil {
		return Allocation{}, false, nil, fmt.Errorf("del %s: %w", key, err)
	}
	if freed {
		p.wakeLocked()
	}
	p.log.Debug("address freed", "attachment", key.String(), "addr", a.addr, "cool_until", coolUntil, "held", hold)
	if hold {
		unhold = p.unholdFunc(a.addr)
	}
	return *cur, true, unhold, nil
}

// Get returns the allocation of key.
func (p *Pool) Get(key Key) (Allocation, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	al, ok := p.allocs[key]
	if !ok {
		return Allocation{}, false
	}
	return *al, true
}

// Allocations returns every allocation, ordered by key.
func (p *Pool) Allocations() []Allocation {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Allocation, 0, len(p.allocs))
	for _, al := range sortedAllocs(p.allocs) {
		out = append(out, *al)
	}
	return out
}

// Pending is the number of ADDs waiting for an address now.
func (p *Pool) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending
}
