package cniwire

import (
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// conn is the client's end of a call: a unix stream socket in blocking
// mode, bounded by deadlines the kernel enforces (SO_SNDTIMEO and
// SO_RCVTIMEO). A plugin process makes one call and exits, so Go's network
// poller would be start-up cost alone: an epoll instance, a thread waiting
// in it, and a hand-off from that thread to wake the caller when the agent
// answers. Here the caller's own thread sleeps in read(2) until then.
type conn struct {
	fd       int
	deadline time.Time // zero: none
}

// dial connects to the unix socket at path by deadline (zero: none).
func dial(path string, deadline time.Time) (*conn, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	c := &conn{fd: fd, deadline: deadline}
	err = c.retry(unix.SO_SNDTIMEO, func() error { return unix.Connect(fd, &unix.SockaddrUnix{Name: path}) })
	if err != nil {
		unix.Close(fd)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			err = os.NewSyscallError("connect", err)
		}
		return nil, err
	}
	return c, nil
}

// SetDeadline bounds every later read and write (zero: none).
func (c *conn) SetDeadline(t time.Time) { c.deadline = t }

func (c *conn) Read(p []byte) (int, error) {
	var n int
	err := c.retry(unix.SO_RCVTIMEO, func() (err error) {
		n, err = unix.Read(c.fd, p)
		return err
	})
	switch {
	case err != nil:
		return 0, err
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *conn) Write(p []byte) (int, error) {
	total := 0
	for total < len(p) {
		var n int
		err := c.retry(unix.SO_SNDTIMEO, func() (err error) {
			n, err = unix.Write(c.fd, p[total:])
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

func (c *conn) Close() error { return unix.Close(c.fd) }

// retry runs the blocking syscall op with the socket's timeout (opt) set to
// what is left until the deadline, again after a signal interrupted it (a
// socket with a timeout is not restarted), and reports a timeout as
// os.ErrDeadlineExceeded.
func (c *conn) retry(opt int, op func() error) error {
	for {
		var tv unix.Timeval
		if !c.deadline.IsZero() {
			left := time.Until(c.deadline)
			if left <= 0 {
				return os.ErrDeadlineExceeded
			}
			if left < time.Microsecond {
				left = time.Microsecond
			}
			tv = unix.NsecToTimeval(left.Nanoseconds())
		}
		if err := unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, opt, &tv); err != nil {
			return os.NewSyscallError("setsockopt", err)
		}
		err := op()
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN || err == unix.EINPROGRESS:
			// A blocking socket says this only when its timeout ran out.
			return os.ErrDeadlineExceeded
		}
		return err
	}
}
