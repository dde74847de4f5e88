package rpcerr

import (
	"errors"
	"fmt"
)

// Errors of the broker's store and services, the domain side of the table
// in rpcerr.go. The broker returns them (wrapped); a client gets them back
// from Error. Compare with errors.Is; the text of the wrapping error names
// the record or key involved.
var (
	// ErrNotFound means the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a compared revision changed under the caller; re-read
	// and retry.
	ErrConflict = errors.New("conflict: record changed concurrently")
	// ErrCorrupt means a stored value does not decode or carries a schema
	// version this code does not understand.
	ErrCorrupt = errors.New("corrupt record")
	// ErrBudgetExceeded is wrapped by *BudgetError.
	ErrBudgetExceeded = errors.New("budget exceeded")
	// ErrNotOwner means a node acted on another node's ENI, addresses or
	// release.
	ErrNotOwner = errors.New("not owner")
	// ErrInvalid means a malformed argument.
	ErrInvalid = errors.New("invalid argument")
	// ErrWrongState means the record is in a state that does not allow the
	// operation (completing a failed intent, finishing an unacknowledged
	// release). Retrying will not help.
	ErrWrongState = errors.New("wrong state")
	// ErrNotLeader means a fenced write was refused because the broker that
	// made it no longer holds the election key it was elected with: another
	// replica may lead, so the caller must stop changing EC2.
	ErrNotLeader = errors.New("not leader: election key lost")
)

// BudgetError says which subnet refused a reservation and why.
type BudgetError struct {
	SubnetID  string
	Limit     int64
	Use       int64 // Attached + Reserved
	Requested int64
}

// Error reports the subnet, its limit, the current use and the request.
func (e *BudgetError) Error() string {
	return fmt.Sprintf("subnet %s: budget exceeded: limit %d, in use %d, requested %d",
		e.SubnetID, e.Limit, e.Use, e.Requested)
}

// Unwrap returns ErrBudgetExceeded.
func (e *BudgetError) Unwrap() error { return ErrBudgetExceeded }
