package cniwire

import (
	"context"
	"errors"
	"io"
	"os"
	"time"
)

// Call is CallBy with ctx's deadline (none if it has none); nothing else of
// ctx is watched (a CNI command has no other cancellation).
func Call(ctx context.Context, socket string, hello time.Duration, req Request) ([]byte, error) {
	deadline, _ := ctx.Deadline()
	return CallBy(deadline, socket, hello, req)
}

// CallBy makes one call to the agent serving socket and returns the
// response's body, or an *Error: the agent's, or Unavailable when no agent
// could be reached (no socket, nothing listening, an agent that closed the
// connection or did not send its preamble within hello), or
// DeadlineExceeded when the deadline passed first. The deadline (zero:
// none) is sent to the agent as the call's timeout and bounds the whole
// call. It is a time, not a context, so that a plugin process needs no
// runtime timer: the first timer a Go process sets starts its network
// poller (an epoll instance and a thread waiting in it), which a call on
// a blocking socket does not otherwise need.
func CallBy(deadline time.Time, socket string, hello time.Duration, req Request) ([]byte, error) {
	hasDeadline := !deadline.IsZero()
	if hasDeadline {
		req.Timeout = time.Until(deadline)
		if req.Timeout <= 0 {
			return nil, Errorf(DeadlineExceeded, "no time left for the call")
		}
	}
	conn, err := dial(socket, deadline)
	if err != nil {
		return nil, Errorf(Unavailable, "connect to the agent at %s: %v", socket, err)
	}
	defer conn.Close()

	// The agent's preamble is due within hello, or the call's deadline if
	// that comes first.
	helloBy := time.Now().Add(hello)
	if hasDeadline && deadline.Before(helloBy) {
		helloBy = deadline
	}
	conn.SetDeadline(helloBy)
	if _, err := conn.Write(AppendRequest([]byte(Preamble), req)); err != nil {
		return nil, Errorf(Unavailable, "send the call to the agent at %s: %v", socket, err)
	}
	var pre [len(Preamble)]byte
	if _, err := io.ReadFull(conn, pre[:]); err != nil {
		return nil, helloError(socket, hello, deadline, err)
	}
	if string(pre[:]) != Preamble {
		return nil, Errorf(Unavailable, "the agent at %s does not speak this plugin's protocol (is it older than the plugin?)", socket)
	}
	conn.SetDeadline(deadline) // zero: none
	p, err := ReadFrame(conn)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, Errorf(DeadlineExceeded, "the agent did not answer before the deadline")
	case err != nil:
		return nil, Errorf(Unavailable, "read the agent's answer: %v", err)
	}
	res, err := ParseResponse(p)
	if err != nil {
		return nil, Errorf(Internal, "%v", err)
	}
	if res.Code != OK {
		return nil, &Error{Code: res.Code, Message: res.Message}
	}
	return res.Body, nil
}

// helloError explains why the agent's preamble did not arrive.
func helloError(socket string, hello time.Duration, deadline time.Time, err error) *Error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) && !deadline.IsZero() && !time.Now().Before(deadline):
		return Errorf(DeadlineExceeded, "the agent did not answer before the deadline")
	case errors.Is(err, os.ErrDeadlineExceeded):
		return Errorf(Unavailable, "the agent at %s accepted the connection but did not answer within %v (is it stopped or wedged?)", socket, hello)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(Unavailable, "the agent at %s closed the connection without answering (is it older than the plugin?)", socket)
	}
	return Errorf(Unavailable, "read from the agent at %s: %v", socket, err)
}
