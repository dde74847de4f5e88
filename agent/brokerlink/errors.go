package brokerlink

import (
	"errors"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// The broker's answers are decoded by rpcerr, the API's one table between
// domain errors and gRPC codes; it lives beside the protos, so the agent
// links nothing of the broker.

// isNotFound: the broker has no such record (a withdrawn release).
func isNotFound(err error) bool { return errors.Is(rpcerr.Error(err), rpcerr.ErrNotFound) }

// isWrongState: the broker's record already holds a different answer.
func isWrongState(err error) bool { return errors.Is(rpcerr.Error(err), rpcerr.ErrWrongState) }
