package brokerlink

import (
	"errors"

	"github.com/allotnet/allot/broker/errs"
	"github.com/allotnet/allot/broker/server/rpcerr"
)

// The broker's answers are decoded by rpcerr, the one table between its
// domain errors and gRPC codes; rpcerr and broker/errs link no etcd, so
// the agent stays free of the broker's store.

// isNotFound: the broker has no such record (a withdrawn release).
func isNotFound(err error) bool { return errors.Is(rpcerr.Error(err), errs.ErrNotFound) }

// isWrongState: the broker's record already holds a different answer.
func isWrongState(err error) bool { return errors.Is(rpcerr.Error(err), errs.ErrWrongState) }
