package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/allotnet/allot/awssim/world"
)

// NetnsDir is where named network namespaces are mounted; `ip netns`
// lists the same directory (/var/run is a link to /run).
const NetnsDir = "/run/netns"

// Suffixes of the two shared namespaces; node namespaces end in the
// instance ID instead.
const (
	suffixVPC     = "vpc"
	suffixOutside = "out"
)

var prefixPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$`)

func checkPrefix(prefix string) error {
	if !prefixPattern.MatchString(prefix) {
		return fmt.Errorf("dataplane prefix %q must be 1-200 letters, digits, '.', '_' or '-', starting with a letter or digit", prefix)
	}
	return nil
}

// owns reports whether a namespace name is one a plane with this prefix
// creates. Matching the whole shape, not just the prefix, keeps
// "allot-demo-1" from claiming "allot-demo-12-vpc" of another run.
func owns(prefix, name string) bool {
	rest, ok := strings.CutPrefix(name, prefix+"-")
	if !ok {
		return false
	}
	return rest == suffixVPC || rest == suffixOutside || world.ValidID(world.PrefixInstance, rest)
}

// ownedNamespaces lists the mounted namespaces a plane with prefix owns.
func ownedNamespaces(prefix string) ([]string, error) {
	entries, err := os.ReadDir(NetnsDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", NetnsDir, err)
	}
	var out []string
	for _, e := range entries {
		if owns(prefix, e.Name()) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// Cleanup deletes every namespace a plane with this prefix would have
// created (a crashed run's leftovers) and nothing else. Deleting a
// namespace destroys the veth pairs inside it, so no link survives.
func Cleanup(prefix string) error {
	if err := checkPrefix(prefix); err != nil {
		return err
	}
	names, err := ownedNamespaces(prefix)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		errs = append(errs, deleteNamed(n))
	}
	return errors.Join(errs...)
}

// Prefixes lists the prefixes of every plane whose VPC namespace exists
// and whose prefix starts with stem, so a harness that names its runs
// "<stem><run id>" can find its crashed runs and Cleanup each (after making
// sure the run is really gone: a live run's namespaces look the same).
func Prefixes(stem string) ([]string, error) {
	entries, err := os.ReadDir(NetnsDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", NetnsDir, err)
	}
	var out []string
	for _, e := range entries {
		prefix, ok := strings.CutSuffix(e.Name(), "-"+suffixVPC)
		if ok && strings.HasPrefix(prefix, stem) && checkPrefix(prefix) == nil {
			out = append(out, prefix)
		}
	}
	slices.Sort(out)
	return out, nil
}

// namespace is a named network namespace this plane created, with an open
// handle (which keeps it alive) and an rtnetlink socket bound to it.
type namespace struct {
	name string
	fd   netns.NsHandle
	nl   *netlink.Handle
}

func (n *namespace) path() string { return filepath.Join(NetnsDir, n.name) }

// createNamed makes a new named namespace with lo up. It fails if the name
// is taken, so two planes can never share a namespace.
func createNamed(name string) (*namespace, error) {
	fd, err := newNamed(name)
	if err != nil {
		return nil, fmt.Errorf("create netns %s: %w", name, err)
	}
	n := &namespace{name: name, fd: fd}
	n.nl, err = netlink.NewHandleAt(fd, unix.NETLINK_ROUTE)
	if err != nil {
		n.close()
		return nil, errors.Join(fmt.Errorf("netlink in netns %s: %w", name, err), deleteNamed(name))
	}
	lo, err := n.nl.LinkByName("lo")
	if err == nil {
		err = n.nl.LinkSetUp(lo)
	}
	if err != nil {
		n.close()
		return nil, errors.Join(fmt.Errorf("bring lo up in netns %s: %w", name, err), deleteNamed(name))
	}
	return n, nil
}

// newNamed creates and mounts the namespace on a thread of its own:
// netns.NewNamed switches the calling thread into the new namespace, so the
// thread is switched back, or left locked to die with its goroutine if it
// cannot be.
func newNamed(name string) (netns.NsHandle, error) {
	type result struct {
		fd  netns.NsHandle
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{netns.None(), fmt.Errorf("get current netns: %w", err)}
			return
		}
		defer orig.Close()
		fd, err := netns.NewNamed(name)
		if serr := netns.Set(orig); serr != nil {
			if fd.IsOpen() {
				fd.Close()
			}
			ch <- result{netns.None(), errors.Join(err, fmt.Errorf("return to original netns: %w", serr))}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}

// close releases the handles; the namespace lives on while mounted.
func (n *namespace) close() {
	if n.nl != nil {
		n.nl.Close()
		n.nl = nil
	}
	if n.fd.IsOpen() {
		n.fd.Close()
		n.fd = netns.None()
	}
}

// destroy releases the handles and unmounts the namespace.
func (n *namespace) destroy() error {
	n.close()
	return deleteNamed(n.name)
}

// deleteNamed unmounts and removes a named namespace. A name already gone
// is not an error, and a leftover file nothing is mounted on is removed.
func deleteNamed(name string) error {
	p := filepath.Join(NetnsDir, name)
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", name, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", name, err)
	}
	return nil
}

// inNetNS runs fn on a thread switched into ns: /proc/sys/net shows the
// namespace of the thread that opens it.
func inNetNS(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("get current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns: %w", err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("return to original netns: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// setSysctls writes /proc/sys settings (keys with slashes) inside n.
func (n *namespace) setSysctls(kv ...string) error {
	return inNetNS(n.fd, func() error {
		for i := 0; i+1 < len(kv); i += 2 {
			if err := os.WriteFile(filepath.Join("/proc/sys", kv[i]), []byte(kv[i+1]), 0o644); err != nil {
				return fmt.Errorf("set sysctl %s=%s in netns %s: %w", kv[i], kv[i+1], n.name, err)
			}
		}
		return nil
	})
}

func isNotFound(err error) bool {
	var lnf netlink.LinkNotFoundError
	return errors.As(err, &lnf) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) ||
		errors.Is(err, unix.ENODEV)
}
