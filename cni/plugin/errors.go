package plugin

import (
	"fmt"

	"github.com/allotnet/allot/cni/cnispec"

	"github.com/allotnet/allot/agent/cniserver/cniwire"
)

// CodeCheckFailed is allot's own CNI error code (the spec leaves 100 and up
// to plugins) for a CHECK that found the attachment not as recorded.
const CodeCheckFailed uint = 100

// cniCodes is the one table from the code of a failed agent call (the
// agent's error table, cniserver.ErrorCodes, or the plugin's own for an
// agent it could not reach) to the CNI error code the runtime sees: Code
// for ADD, DEL, CHECK and GC, Status for STATUS (where 50 means "cannot
// serve ADDs" and 51 "existing containers may have limited connectivity").
// Codes not in the table are internal errors (999 / 51).
var cniCodes = map[cniwire.Code]struct{ Code, Status uint }{
	// The agent's pool is empty and nothing arrived in time (ADD), or it is
	// empty and can't be refilled (STATUS): no ADD can be served, which is
	// 50; the pods already running keep their addresses, so not 51.
	cniwire.ResourceExhausted: {cnispec.ErrTryAgainLater, cnispec.ErrPluginNotAvailable},
	// No socket, connection refused, or the agent is starting.
	cniwire.Unavailable: {cnispec.ErrTryAgainLater, cnispec.ErrPluginNotAvailable},
	// The agent did not answer within the netconf timeout.
	cniwire.DeadlineExceeded: {cnispec.ErrTryAgainLater, cnispec.ErrPluginNotAvailable},
	cniwire.Canceled:         {cnispec.ErrTryAgainLater, cnispec.ErrPluginNotAvailable},
	// CHECK of an attachment the agent never saw.
	cniwire.NotFound: {cnispec.ErrUnknownContainer, cnispec.ErrLimitedConnectivity},
	// The key or netns the runtime passed (through CNI_* variables) is bad.
	cniwire.InvalidArgument:    {cnispec.ErrInvalidEnvironmentVariables, cnispec.ErrLimitedConnectivity},
	cniwire.FailedPrecondition: {CodeCheckFailed, cnispec.ErrLimitedConnectivity},
	// An agent too old for this plugin.
	cniwire.Unimplemented: {cnispec.ErrIncompatibleCNIVersion, cnispec.ErrPluginNotAvailable},
}

// agentError turns a failed agent call into a typed CNI error for verb.
func agentError(verb string, err error) *cnispec.Error {
	code := cniwire.CodeOf(err)
	c, ok := cniCodes[code]
	if !ok {
		c.Code, c.Status = cnispec.ErrInternal, cnispec.ErrLimitedConnectivity
	}
	cniCode := c.Code
	if verb == "STATUS" {
		cniCode = c.Status
	}
	return cnispec.NewError(cniCode, fmt.Sprintf("allot agent %s failed: %s", verb, cniwire.MessageOf(err)), hint(code))
}

// hint tells the operator what to do about the common failures.
func hint(c cniwire.Code) string {
	switch c {
	case cniwire.Unavailable:
		return "is allot-agent running and serving the agentSocket from the network config?"
	case cniwire.DeadlineExceeded:
		return "the agent did not answer within the timeout from the network config"
	case cniwire.ResourceExhausted:
		return "no pod address available yet; the runtime will retry"
	}
	return ""
}

// agentUnreachable reports whether err means the call never reached an
// agent that could act on it, so a DEL must be queued.
func agentUnreachable(err error) bool {
	switch cniwire.CodeOf(err) {
	case cniwire.Unavailable, cniwire.DeadlineExceeded, cniwire.Canceled:
		return true
	}
	return false
}
