package store

import (
	"fmt"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// ledger collects changes to subnet counters within one view, so a
// transaction touching the same subnet twice (reservation returned, addresses
// attached) writes it once.
type ledger struct {
	v    *view
	subs map[string]*Subnet
	ids  []string
}

func newLedger(v *view) *ledger { return &ledger{v: v, subs: map[string]*Subnet{}} }

// subnet loads a subnet into the ledger; rpcerr.ErrNotFound if absent.
func (l *ledger) subnet(id string) (*Subnet, error) {
	if sn, ok := l.subs[id]; ok {
		return sn, nil
	}
	var sn Subnet
	ok, err := get(l.v, kindSubnets, id, &sn)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("subnet %s: %w", id, rpcerr.ErrNotFound)
	}
	l.subs[id] = &sn
	l.ids = append(l.ids, id)
	return &sn, nil
}

// unreserve returns n reserved addresses to the subnet.
func (l *ledger) unreserve(id string, n int64) error {
	if n == 0 {
		return nil
	}
	sn, err := l.subnet(id)
	if err != nil {
		return err
	}
	// Never below zero, even if an operator edited the record by hand.
	sn.Reserved = max(0, sn.Reserved-n)
	return nil
}

// attach adds delta (possibly negative) to the subnet's Attached.
func (l *ledger) attach(id string, delta int64) error {
	if delta == 0 {
		return nil
	}
	sn, err := l.subnet(id)
	if err != nil {
		return err
	}
	sn.Attached = max(0, sn.Attached+delta)
	return nil
}

// flush queues a put of every subnet the ledger loaded.
func (l *ledger) flush() error {
	for _, id := range l.ids {
		if err := l.v.put(l.v.s.key(kindSubnets, id), l.subs[id]); err != nil {
			return err
		}
	}
	return nil
}
