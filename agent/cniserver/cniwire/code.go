package cniwire

import (
	"errors"
	"fmt"
)

// Code is a call's outcome. Its values are gRPC's status codes, so the
// agent's one table from domain errors to codes serves both wires and the
// plugin maps one set of codes to CNI error codes.
type Code uint32

// The codes the agent and the plugin use, with gRPC's numbers.
const (
	OK                 Code = 0
	Canceled           Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	NotFound           Code = 5
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
)

var codeNames = map[Code]string{
	OK: "OK", Canceled: "Canceled", Unknown: "Unknown", InvalidArgument: "InvalidArgument",
	DeadlineExceeded: "DeadlineExceeded", NotFound: "NotFound", ResourceExhausted: "ResourceExhausted",
	FailedPrecondition: "FailedPrecondition", Unimplemented: "Unimplemented", Internal: "Internal",
	Unavailable: "Unavailable",
}

// String is the code's gRPC name.
func (c Code) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("Code(%d)", uint32(c))
}

// Error is a failed call: the agent's code and message, or the client's
// own (Unavailable for an agent it could not reach, DeadlineExceeded for
// one that did not answer in time).
type Error struct {
	Code    Code
	Message string
}

// Errorf returns an *Error with code c.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	return fmt.Sprintf("cni call failed: code = %s desc = %s", e.Code, e.Message)
}

// CodeOf is err's code: OK for nil, the code of an *Error in its chain,
// else Unknown.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Unknown
}

// MessageOf is err's message: an *Error's own, else err's text.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
