// Package netnstest makes, enters, lists and removes named network
// namespaces for everything that builds a network around allot outside
// the product: the stand-in AWS's VPC data plane, the one-machine cluster,
// the end-to-end harness and hostnet's kernel tests. It also holds the
// retry for netlink dumps the kernel interrupts. The agent's own host
// networking (agent/hostnet) keeps its own copies of what it needs, so no
// product binary links this package.
package netnstest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Dir is where named network namespaces are mounted; `ip netns` lists the
// same directory (/var/run is a link to /run).
const Dir = "/run/netns"

// NS is a named network namespace: an open handle (which keeps it alive
// while it is mounted) and an rtnetlink socket bound to it.
type NS struct {
	Name string
	// Path is where the namespace is mounted, as a runtime passes CNI_NETNS.
	Path string
	// NL is an rtnetlink handle bound to the namespace.
	NL *netlink.Handle

	h      netns.NsHandle
	closed atomic.Bool
}

// Create makes and mounts the named namespace with lo up, as a runtime's
// pause sandbox has it. It fails if the name is taken, so two users can
// never share a namespace; on failure nothing is left behind.
func Create(name string) (*NS, error) {
	h, err := newNamed(name)
	if errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create netns %s: %w", name, err) // someone else's: leave it be
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create netns %s: %w", name, err), Delete(name))
	}
	n := &NS{Name: name, Path: filepath.Join(Dir, name), h: h}
	if n.NL, err = netlink.NewHandleAt(h, unix.NETLINK_ROUTE); err != nil {
		return nil, errors.Join(fmt.Errorf("netlink in netns %s: %w", name, err), n.Delete())
	}
	lo, err := n.NL.LinkByName("lo")
	if err == nil {
		err = n.NL.LinkSetUp(lo)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("bring lo up in netns %s: %w", name, err), n.Delete())
	}
	return n, nil
}

// newNamed creates and mounts the namespace on a thread of its own:
// netns.NewNamed switches the calling thread into the new namespace, so the
// thread is switched back, or left locked to die with its goroutine if it
// cannot be.
func newNamed(name string) (netns.NsHandle, error) {
	h := netns.None()
	err := onLockedThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return fmt.Errorf("get current netns: %w", err)
		}
		defer orig.Close()
		h, err = netns.NewNamed(name)
		if serr := netns.Set(orig); serr != nil {
			return errors.Join(err, fmt.Errorf("%w: return to original netns: %w", errStranded, serr))
		}
		return err
	})
	if err != nil && h.IsOpen() {
		h.Close()
		h = netns.None()
	}
	return h, err
}

// Handle is the namespace's file handle (for netlink.NsFd and friends).
func (n *NS) Handle() netns.NsHandle { return n.h }

// Do runs fn on an OS thread inside the namespace. Sockets fn opens stay in
// the namespace after it returns, and processes it starts are born there.
func (n *NS) Do(fn func() error) error { return doIn(n.h, n.Name, fn) }

// Sysctl writes one /proc/sys value (key with slashes) inside the
// namespace: /proc/sys/net shows the namespace of the thread that opens it.
func (n *NS) Sysctl(key, value string) error {
	return n.Do(func() error { return os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644) })
}

// Close releases the handles; the namespace lives on while mounted. Safe to
// call twice.
func (n *NS) Close() {
	if n.closed.Swap(true) {
		return
	}
	if n.NL != nil {
		n.NL.Close()
	}
	if n.h.IsOpen() {
		n.h.Close()
	}
}

// Delete releases the handles and unmounts the namespace; the kernel then
// removes its links (and the peers of its veths). Safe to call twice.
func (n *NS) Delete() error {
	n.Close()
	return Delete(n.Name)
}

// Delete unmounts and removes a named namespace. A name already gone is not
// an error, and a leftover file nothing is mounted on is removed.
func Delete(name string) error {
	p := filepath.Join(Dir, name)
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", name, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", name, err)
	}
	return nil
}

// List returns the mounted namespaces whose name match accepts, sorted.
func List(match func(name string) bool) ([]string, error) {
	entries, err := os.ReadDir(Dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", Dir, err)
	}
	var out []string
	for _, e := range entries {
		if match(e.Name()) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// WithPrefix lists the mounted namespaces whose name starts with prefix, as
// `ip netns list` shows them.
func WithPrefix(prefix string) ([]string, error) {
	return List(func(name string) bool { return strings.HasPrefix(name, prefix) })
}

// DoInPath runs fn inside the namespace mounted at path.
func DoInPath(path string, fn func() error) error {
	h, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", path, err)
	}
	defer h.Close()
	return doIn(h, path, fn)
}

// DoIn runs fn on an OS thread switched into the namespace h. fn's own error
// is returned as it is.
func DoIn(h netns.NsHandle, fn func() error) error { return doIn(h, fmt.Sprint(h), fn) }

func doIn(h netns.NsHandle, name string, fn func() error) error {
	return onLockedThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return fmt.Errorf("get current netns: %w", err)
		}
		defer orig.Close()
		if err := netns.Set(h); err != nil {
			return fmt.Errorf("enter netns %s: %w", name, err)
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			return errors.Join(ferr, fmt.Errorf("%w: leave netns %s: %w", errStranded, name, err))
		}
		return ferr
	})
}

// errStranded marks a thread that could not return to its namespace.
var errStranded = errors.New("thread stranded in another namespace")

// onLockedThread runs fn on a goroutine locked to its OS thread. A thread
// that could not return to its namespace is left locked, so Go retires it
// instead of running other goroutines in the wrong namespace.
func onLockedThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := fn()
		if !errors.Is(err, errStranded) {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// RetryDump repeats a netlink dump the kernel interrupted because the table
// changed underneath it (netlink.ErrDumpInterrupted): a partial dump would
// make a link or route that exists look gone.
func RetryDump[T any](dump func() (T, error)) (T, error) {
	var v T
	var err error
	for range 10 {
		v, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, fmt.Errorf("netlink dump kept being interrupted: %w", err)
}
