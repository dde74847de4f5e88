package brokerlink

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// The broker's answers are decoded by rpcerr, the API's one table between
// domain errors and gRPC codes; it lives beside the protos, so the agent
// links nothing of the broker.

// isNotFound: the broker has no such record (a withdrawn release).
func isNotFound(err error) bool { return errors.Is(rpcerr.Error(err), rpcerr.ErrNotFound) }

// isWrongState: the broker's record already holds a different answer.
func isWrongState(err error) bool { return errors.Is(rpcerr.Error(err), rpcerr.ErrWrongState) }

// isBusy: the broker did not take the call now (it refused it as busy,
// could not be reached, or did not answer in time); the call is worth
// trying again later, after a backoff.
func isBusy(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}
