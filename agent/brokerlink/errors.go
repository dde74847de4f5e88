package brokerlink

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// brokerDomain is the ErrorInfo domain of errors the broker describes
// (broker/server/rpcerr). The agent reads the reason itself rather than
// importing rpcerr, whose table names the broker's etcd store errors and
// would link the etcd client into every node's agent.
const brokerDomain = "allot.dev"

// reason returns the ErrorInfo reason the broker attached to err, if any.
func reason(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == brokerDomain {
			return info.GetReason()
		}
	}
	return ""
}

// isNotFound: the broker has no such record (a withdrawn release).
func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }

// isWrongState: the broker's record already holds a different answer.
func isWrongState(err error) bool {
	return status.Code(err) == codes.FailedPrecondition && reason(err) == "WRONG_STATE"
}
