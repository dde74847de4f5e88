package store

import (
	"context"
	"errors"
	"slices"
)

// MaxBatch is the most ops Apply commits in one transaction. etcd refuses
// a transaction of more than 128 compares or 128 operations (its
// --max-txn-ops default), and an op reads and writes at most four keys
// (its intent, ENI, release and subnet), five if ReadsSubnet named the
// wrong subnet: 25 ops stay under that even when each names a subnet of
// its own, with the fence's compare besides.
const MaxBatch = 25

// Op is one intent write (BeginIntent, a Complete*, FailIntent) made ready
// to commit, alone or with others in one transaction (Apply). Build it
// with BeginOp, CompleteCreateOp, ..., FailOp; after Apply, Err is its own
// outcome.
type Op struct {
	method string
	// keys are the keys the op is known to read, so one read takes them
	// all; the op may read more (the view asks for them).
	keys   func(s *Store) []string
	subnet string // read with keys (ReadsSubnet)
	decide func(v *view) error
	done   func(rev int64) // after the op's writes committed at rev
	err    error

	intent Intent // BeginOp's result
}

// Err returns the op's outcome once applied: nil if its writes committed
// (or it needed none, as a repeated completion), its own refusal (a
// *rpcerr.BudgetError, rpcerr.ErrNotOwner, ...), or the error that failed
// its whole transaction (rpcerr.ErrNotLeader, etcd unreachable).
func (op *Op) Err() error { return op.err }

// ReadsSubnet names the subnet whose record the op will read (its
// intent's), when the caller knows it, so the op's first read takes it
// too and the transaction needs no second read. A wrong guess costs only
// that read.
func (op *Op) ReadsSubnet(id string) *Op {
	if checkID("subnet", id) == nil {
		op.subnet = id
	}
	return op
}

// Intent returns the intent BeginOp recorded (or found recorded already).
func (op *Op) Intent() Intent {
	if op.err != nil {
		return Intent{}
	}
	return op.intent
}

// Apply commits ops together: one transaction for up to MaxBatch of them,
// several in turn for more. Each op decides in order on the records as the
// ops before it in the same transaction left them, and makes exactly the
// checks it makes alone (a budget's Available(), ownership, releases, an
// intent ID's idempotency). An op that fails its checks writes nothing and
// gets its own error without stopping the others. A failure of the
// transaction itself (the fence, etcd) goes to every op in it and is
// returned too; a compare that failed because another writer came first
// re-decides every op on the fresh records, as update does.
//
// ctx carries the fence and write mark for all of them (see SameWriter).
func (s *Store) Apply(ctx context.Context, ops ...*Op) error {
	var first error
	for chunk := range slices.Chunk(ops, MaxBatch) {
		if err := s.applyBatch(ctx, chunk); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (s *Store) applyBatch(ctx context.Context, ops []*Op) error {
	var live []*Op
	var keys []string
	for _, op := range ops {
		if op.err == nil {
			live = append(live, op)
			keys = appendNew(keys, op.keys(s))
			if op.subnet != "" {
				keys = appendNew(keys, []string{s.key(kindSubnets, op.subnet)})
			}
		}
	}
	if len(live) == 0 {
		return nil
	}
	method := live[0].method
	if len(live) > 1 {
		method = "IntentBatch"
	}
	rev, err := s.update(ctx, method, keys, nil, func(v *view) error {
		want := false
		for _, op := range live {
			mark := v.savepoint()
			if op.err = op.decide(v); op.err != nil {
				v.rollback(mark)
				want = want || errors.Is(op.err, errWant)
			}
		}
		if want {
			return errWant
		}
		return nil
	})
	for _, op := range live {
		switch {
		case err != nil:
			op.err = err
		case op.err == nil && op.done != nil:
			op.done(rev)
		}
	}
	return err
}

// apply commits one op and returns its outcome.
func (s *Store) apply(ctx context.Context, op *Op) error {
	_ = s.Apply(ctx, op)
	return op.err
}

// SameWriter reports whether writes made with a and b may share one
// transaction (Apply): both carry the same fence (or none) and the same
// write mark (or none).
func SameWriter(a, b context.Context) bool {
	fa, _ := FenceFrom(a)
	fb, _ := FenceFrom(b)
	ma, _ := a.Value(writeMarkKey{}).(*WriteMark)
	mb, _ := b.Value(writeMarkKey{}).(*WriteMark)
	return fa == fb && ma == mb
}
