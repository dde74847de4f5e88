package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/allotnet/allot/awssim/dataplane"
)

// netNS is a named network namespace the harness created for a pod.
type netNS struct {
	name string
	h    netns.NsHandle
}

// path is where the namespace is mounted, as a runtime passes CNI_NETNS.
func (n *netNS) path() string { return filepath.Join(dataplane.NetnsDir, n.name) }

// createNetNS creates and mounts a named namespace with lo up. It fails if
// the name is taken, so a pod can never share another's namespace.
func createNetNS(name string) (*netNS, error) {
	var h netns.NsHandle
	err := onLockedThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return fmt.Errorf("get current netns: %w", err)
		}
		defer orig.Close()
		h, err = netns.NewNamed(name)
		return errors.Join(err, netns.Set(orig))
	})
	if err != nil {
		if h.IsOpen() {
			h.Close()
		}
		return nil, errors.Join(fmt.Errorf("create netns %s: %w", name, err), deleteNetNS(name))
	}
	n := &netNS{name: name, h: h}
	// Loopback up, as a runtime's pause sandbox has it.
	if err := n.loUp(); err != nil {
		return nil, errors.Join(err, n.delete())
	}
	return n, nil
}

func (n *netNS) loUp() error {
	nl, err := netlink.NewHandleAt(n.h, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink in netns %s: %w", n.name, err)
	}
	defer nl.Close()
	lo, err := nl.LinkByName("lo")
	if err == nil {
		err = nl.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("bring lo up in netns %s: %w", n.name, err)
	}
	return nil
}

// do runs fn on an OS thread switched into the namespace. Sockets fn opens
// stay in the namespace after it returns.
func (n *netNS) do(fn func() error) error { return inNetNS(n.h, n.name, fn) }

// delete closes the handle and unmounts the namespace; the kernel then
// removes its links (and the host ends of its veths). Safe to call twice.
func (n *netNS) delete() error {
	if n.h.IsOpen() {
		n.h.Close()
		n.h = netns.None()
	}
	return deleteNetNS(n.name)
}

// doInPath runs fn inside the namespace mounted at path.
func doInPath(path string, fn func() error) error {
	h, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", path, err)
	}
	defer h.Close()
	return inNetNS(h, path, fn)
}

func inNetNS(h netns.NsHandle, name string, fn func() error) error {
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
			return errors.Join(ferr, fmt.Errorf("%w: leave netns %s: %w", errStrandedThread, name, err))
		}
		return ferr
	})
}

// errStrandedThread marks a thread that could not return to its namespace.
var errStrandedThread = errors.New("thread stranded in another namespace")

// onLockedThread runs fn on a goroutine locked to its OS thread. A thread
// that could not return to the root namespace is left locked, so Go
// retires it instead of running other goroutines in the wrong namespace.
func onLockedThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := fn()
		if !errors.Is(err, errStrandedThread) {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// deleteNetNS unmounts a named namespace; a name already gone is fine.
func deleteNetNS(name string) error {
	if err := netns.DeleteNamed(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete netns %s: %w", name, err)
	}
	return nil
}

// namespacesWithPrefix lists the mounted namespaces whose name starts with
// prefix, as `ip netns list` shows them.
func namespacesWithPrefix(prefix string) ([]string, error) {
	entries, err := os.ReadDir(dataplane.NetnsDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", dataplane.NetnsDir, err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
