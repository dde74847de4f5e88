package cniserver

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Listen creates the unix socket at path with mode 0600, so only root (the
// runtime executing the plugin) can connect. A stale socket left by a dead
// agent is removed first; anything else at path is left alone and reported,
// and so is a socket another agent is still serving on.
//
// The socket is bound under a temporary name, chmod'ed, then renamed into
// place, so no client ever sees it with wider permissions.
func Listen(path string) (net.Listener, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("cni socket path %q is not absolute", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create cni socket directory: %w", err)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	tmp := path + ".tmp-" + strconv.Itoa(os.Getpid())
	_ = os.Remove(tmp) // our own leftover from a previous run with the same pid
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on cni socket: %w", err)
	}
	// The listener would unlink tmp on Close, which no longer exists after
	// the rename; socketListener unlinks the real path instead.
	l.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		l.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("chmod cni socket: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		l.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("move cni socket into place: %w", err)
	}
	return &socketListener{UnixListener: l, path: path}, nil
}

// removeStaleSocket removes path if it is a socket nobody listens on.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect cni socket path: %w", err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("cni socket path %s exists and is not a socket (%s); refusing to remove it", path, fi.Mode().Type())
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("cni socket %s is in use by another process; is another agent running?", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale cni socket: %w", err)
	}
	return nil
}

// socketListener removes the socket file when closed, so the plugin sees
// "agent down" (no socket) rather than a refused connection on a dead file.
type socketListener struct {
	*net.UnixListener
	path string
}

// Close stops listening and removes the socket file.
func (l *socketListener) Close() error {
	err := l.UnixListener.Close()
	if rmErr := os.Remove(l.path); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) && err == nil {
		err = fmt.Errorf("remove cni socket: %w", rmErr)
	}
	return err
}
