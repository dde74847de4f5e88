package cniserver

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Domain errors a Backend returns (wrapped with %w and context). Each has
// its own gRPC code in ErrorCodes, so the plugin can map the code back to a
// CNI error code without parsing messages.
var (
	// ErrPoolEmpty: no free address now, and none arrived within the bounded
	// wait (ADD), or none can be obtained (STATUS). The runtime should retry.
	ErrPoolEmpty = errors.New("no free address in the node's pool")
	// ErrUnknownAttachment: CHECK for an attachment the agent has no record of.
	ErrUnknownAttachment = errors.New("unknown attachment")
	// ErrInvalidRequest: the request is malformed (a missing key part, a
	// netns path that is not a network namespace, an unparsable prevResult).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrCheckFailed: the attachment exists but its network is not what was
	// recorded or what prevResult says (a missing route, a wrong address).
	ErrCheckFailed = errors.New("attachment check failed")
	// ErrNotReady: the agent is up but not serving yet (restoring its
	// checkpoint, identity not known). The runtime should retry.
	ErrNotReady = errors.New("agent not ready")
)

// ErrorCode pairs a domain error with the gRPC code it travels as.
type ErrorCode struct {
	Err  error
	Code codes.Code
}

// ErrorCodes is the one table from domain errors to gRPC codes. The codes
// are distinct; the plugin maps each back to a CNI error code. Errors not in
// the table travel as codes.Internal.
var ErrorCodes = []ErrorCode{
	{ErrPoolEmpty, codes.ResourceExhausted},
	{ErrUnknownAttachment, codes.NotFound},
	{ErrInvalidRequest, codes.InvalidArgument},
	{ErrCheckFailed, codes.FailedPrecondition},
	{ErrNotReady, codes.Unavailable},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	{context.Canceled, codes.Canceled},
}

// Code returns the gRPC code err travels as.
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	for _, ec := range ErrorCodes {
		if errors.Is(err, ec.Err) {
			return ec.Code
		}
	}
	return codes.Internal
}

// toStatus converts a backend error to a gRPC status error carrying the
// full message, so the plugin can show the operator what went wrong. A gRPC
// status the backend got from elsewhere (the broker) is not passed through:
// its code means something about that call, not about this one.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	return status.Error(Code(err), err.Error())
}
