package pool

import (
	"fmt"
	"net/netip"
	"runtime"
)

// Group commit.
//
// Every change must be in the checkpoint before its caller is answered, and
// a checkpoint write (validate, marshal the whole node, write, fsync,
// rename) costs far more than the change itself. Holding mu across each
// write served a burst of ADDs one write at a time. Instead, a change is
// applied in memory under mu and joins the open batch; its caller then
// waits, without mu, until a write that includes the change has completed.
// One write runs at a time: whichever waiter finds none running (after one
// yield if ADDs are arriving, see yieldLocked) takes the open batch,
// snapshots the state under mu, writes it without mu — while later changes
// gather in the next batch — and then completes every change of the batch.
// N ADDs that overlap cost two or three writes, not N.
//
// Every write snapshots everything applied so far, so a later write always
// contains every earlier change. A change applied but not yet written is in
// flight; two rules make undoing one safe when its write fails:
//
//   - Claims. A hot-path change (Add, Del, NextUsageSeq) claims what it
//     touched — the attachment key, the address, the usage sequence — until
//     its write completes, and no other change touches a claimed thing
//     meanwhile: an ADD or DEL of a claimed key waits, pickLocked skips a
//     claimed address (one a DEL in flight freed), a second NextUsageSeq
//     waits. So the changes in flight are disjoint. A failed write runs the
//     undo of each of its changes (newest first), and each undo restores
//     only records no later change has modified or depends on (a later ADD
//     may have preferred a prefix because an undone ADD used it: packing,
//     never consistency); the changes of the next batch stay valid without
//     it, and the next write, which snapshots after the undo, does not
//     contain it.
//   - Exclusive changes. The other mutations (AddENI, AddCapacity, Retain,
//     RemoveENI, ProposeRelease, CancelRelease, CompleteRelease) touch an
//     ENI and many addresses, and are rare (the broker's deliveries and
//     releases). They take lockExclusive: it waits until nothing is in
//     flight and keeps hot-path changes out until the exclusive change's own
//     write has completed. They therefore also decide only on durable state
//     (ProposeRelease never agrees to release an address a DEL in flight
//     freed).
//
// Readers (Get, Usage, Demand, Snapshot, ...) see changes in flight. An
// address an ADD in flight holds is assigned: never reported free nor
// handed to anyone else. An address a DEL in flight frees shows as cooling
// (or free), but nobody can take it or agree to release it before the DEL
// is durable; if the DEL fails it is assigned again.

// claim names what one hot-path change touched; zero fields claim nothing.
type claim struct {
	key      Key
	addr     netip.Addr
	usageSeq bool
}

// batch is the changes that one checkpoint write makes durable.
type batch struct {
	undos  []func()
	claims []claim
	// done and err are set when the write completed (err: it failed and
	// every change of the batch was undone).
	done bool
	err  error
}

// commitLocked makes the change just applied in memory durable, releasing
// mu while it waits for the write; it returns with mu held. If the write
// fails, undo has put the change back (undo must restore exactly what the
// change modified) and the error is returned. claims are held until the
// write completes; a hot-path change must have called waitTurnLocked with
// the same claims before applying its change.
func (p *Pool) commitLocked(undo func(), claims ...claim) error {
	if p.cfg.Store == nil {
		p.notify()
		return nil
	}
	if p.cfg.CommitEachAlone {
		return p.commitAloneLocked(undo)
	}
	if p.open == nil {
		p.open = &batch{}
	}
	b := p.open
	b.undos = append(b.undos, undo)
	for _, c := range claims {
		p.setClaimLocked(c, true)
		b.claims = append(b.claims, c)
	}
	yielded := false
	for !b.done {
		if p.writing == nil && !yielded && p.arriving.Load() > 0 {
			p.yieldLocked()
			yielded = true
			continue // someone else may have written b meanwhile
		}
		if p.writing == nil {
			p.writeLocked() // b is still open: the previous write completed
			continue
		}
		p.awaitLocked()
	}
	if b.err != nil {
		return fmt.Errorf("persist pool state: %w", b.err)
	}
	p.notify()
	return nil
}

// commitAloneLocked writes the state with mu held, so that nothing else
// changes until this change is durable: one write per change.
func (p *Pool) commitAloneLocked(undo func()) error {
	p.snapshotInto(&p.written)
	if err := p.cfg.Store.Save(p.written); err != nil {
		undo()
		p.wakeLocked() // an undone ADD's address is free again
		return fmt.Errorf("persist pool state: %w", err)
	}
	p.notify()
	return nil
}

// writeLocked writes the open batch: snapshot under mu, Save without it,
// then complete the batch under mu again.
func (p *Pool) writeLocked() {
	b := p.open
	p.open, p.writing = nil, b
	p.snapshotInto(&p.written) // only this write uses it until it completes
	p.mu.Unlock()
	err := p.cfg.Store.Save(p.written)
	p.mu.Lock()
	p.writing = nil
	if err != nil {
		for i := len(b.undos) - 1; i >= 0; i-- {
			b.undos[i]()
		}
	}
	for _, c := range b.claims {
		p.setClaimLocked(c, false)
	}
	if p.pending > 0 {
		// Waiting ADDs look again: an undone ADD's address is free again,
		// and an address a DEL freed (or whose cooldown ended while the
		// DEL was in flight) is no longer claimed.
		p.wakeLocked()
	}
	b.done, b.err = true, err
	p.settleLocked()
}

func (p *Pool) setClaimLocked(c claim, on bool) {
	if c.key != (Key{}) {
		setOrDelete(p.claimedKeys, c.key, on)
	}
	if c.addr.IsValid() {
		setOrDelete(p.claimedAddrs, c.addr, on)
	}
	if c.usageSeq {
		p.usageSeqClaimed = on
	}
}

func setOrDelete[K comparable](m map[K]bool, k K, on bool) {
	if on {
		m[k] = true
	} else {
		delete(m, k)
	}
}

func (p *Pool) claimedLocked(c claim) bool {
	return (c.key != (Key{}) && p.claimedKeys[c.key]) ||
		(c.addr.IsValid() && p.claimedAddrs[c.addr]) ||
		(c.usageSeq && p.usageSeqClaimed)
}

// waitTurnLocked waits until a hot-path change that will touch c may be
// applied: no exclusive change is waiting or in flight, and no change in
// flight claims c.
func (p *Pool) waitTurnLocked(c claim) {
	for p.exclusive > 0 || p.claimedLocked(c) {
		p.awaitLocked()
	}
}

// lockExclusive locks mu for a change that must not overlap any other
// change in flight (see above), once every change in flight is durable and
// no other exclusive change is running. Hot-path changes hold off from the
// moment it starts waiting, so a stream of ADDs can't starve it. The
// returned func unlocks.
func (p *Pool) lockExclusive() (unlock func()) {
	p.mu.Lock()
	p.exclusive++
	for p.exclusiveRunning || p.open != nil || p.writing != nil {
		p.awaitLocked()
	}
	p.exclusiveRunning = true
	return func() {
		p.exclusiveRunning = false
		p.exclusive--
		p.settleLocked()
		p.mu.Unlock()
	}
}

// yieldLocked lets other goroutines run once before this one writes, when
// ADDs are on their way (arriving), so that their changes join this batch
// rather than each wait for a write of its own. Where the write blocks (an
// fsync on a disk) they join anyway; where it doesn't (tmpfs, or a CPU that
// every goroutine queues for, as in the burst benchmark) the writer would
// run its whole write before any of them ran, and nothing would be shared.
// It is PostgreSQL's commit_delay with commit_siblings, one scheduler turn
// long.
func (p *Pool) yieldLocked() {
	p.mu.Unlock()
	runtime.Gosched()
	p.mu.Lock()
}

// awaitLocked releases mu until the next settleLocked.
func (p *Pool) awaitLocked() {
	ch := p.settled
	p.mu.Unlock()
	<-ch
	p.mu.Lock()
}

// settleLocked wakes everyone in awaitLocked to look again: a write
// completed (claims released, batches moved on) or an exclusive change
// ended.
func (p *Pool) settleLocked() {
	close(p.settled)
	p.settled = make(chan struct{})
}
