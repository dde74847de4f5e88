package store

import (
	"errors"
	"testing"

	"github.com/allotnet/allot/broker/errs"
)

// The store's sentinels are broker/errs' values, so code that links only
// errs (rpcerr, the agent) matches what the store returns.
func TestSentinelsAreErrs(t *testing.T) {
	for _, p := range [][2]error{
		{ErrNotFound, errs.ErrNotFound}, {ErrConflict, errs.ErrConflict}, {ErrCorrupt, errs.ErrCorrupt},
		{ErrBudgetExceeded, errs.ErrBudgetExceeded}, {ErrNotOwner, errs.ErrNotOwner}, {ErrInvalid, errs.ErrInvalid},
		{ErrWrongState, errs.ErrWrongState}, {ErrNotLeader, errs.ErrNotLeader},
	} {
		if p[0] != p[1] {
			t.Errorf("store %v is not errs %v", p[0], p[1])
		}
	}
	var be *errs.BudgetError
	if err := error(&BudgetError{SubnetID: "subnet-1"}); !errors.As(err, &be) || !errors.Is(err, errs.ErrBudgetExceeded) {
		t.Errorf("store.BudgetError is not errs.BudgetError")
	}
}
