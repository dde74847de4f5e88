package store

import (
	"errors"
	"testing"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// TestUpdateGivesUpAfterItsAttempts: a transaction whose compared prefix
// changes before every commit gives up with ErrConflict after the attempts
// it was given, each one write round trip, and writes nothing. (What
// CorrectSubnet's bound rests on: it compares every ENI and intent record,
// which a burst changes all the time.)
func TestUpdateGivesUpAfterItsAttempts(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	key := s.key(kindSubnets, "subnet-x")
	calls := 0
	_, err := s.updateN(ctx, "Racing", correctAttempts, []string{key}, []string{s.dir(kindENIs)}, func(v *view) error {
		calls++
		// Another writer changes the compared prefix meanwhile.
		if _, err := s.Client().Put(ctx, s.dir(kindENIs)+"eni-x", "x"); err != nil {
			return err
		}
		return v.put(key, &Subnet{ID: "subnet-x"})
	})
	if !errors.Is(err, rpcerr.ErrConflict) {
		t.Fatalf("err %v; want ErrConflict", err)
	}
	if w := s.Writes()["Racing"]; w != correctAttempts || calls != correctAttempts {
		t.Errorf("%d write attempts, %d decisions; want %d of each", w, calls, correctAttempts)
	}
	if r, err := s.Client().Get(ctx, key); err != nil || len(r.Kvs) != 0 {
		t.Errorf("subnet written after giving up: %v %v", r, err)
	}
}
