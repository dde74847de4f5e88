// Package harness builds the world allot's end-to-end tests and the CNI
// latency benchmark run in: real network namespaces for the node, the VPC and
// every pod; awssim playing EC2 and IMDS; the broker in-process (embedded
// etcd, engine, gRPC server); the allot plugin and agent binaries built from
// this tree; and a container runtime's side of CNI through libcni.
//
// Everything it creates is named allot-e2e-<run>-… and removed through
// t.Cleanup, also when a test fails.
package harness

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// RunID tells this process's namespaces and files apart from anyone else's.
var RunID = func() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// Prefix starts the name of every namespace and temporary directory the
// harness creates.
var Prefix = "allot-e2e-" + RunID

var nsSeq atomic.Int64

// RequireRoot skips the test unless it can create network namespaces.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
}

// NetNS is a named network namespace the harness created.
type NetNS struct {
	Name string
	// Path is where the namespace is mounted, as a runtime passes CNI_NETNS.
	Path string
	// NL is an rtnetlink handle bound to the namespace.
	NL *netlink.Handle

	h      netns.NsHandle
	closed atomic.Bool
}

// NewNetNS creates <Prefix>-<seq>-<role> with lo up and registers its
// deletion before anything else can fail.
func NewNetNS(t testing.TB, role string) *NetNS {
	t.Helper()
	ns, err := CreateNetNS(role)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return ns
}

// CreateNetNS creates a namespace without registering a cleanup; the caller
// must Delete it.
func CreateNetNS(role string) (*NetNS, error) {
	name := fmt.Sprintf("%s-%d-%s", Prefix, nsSeq.Add(1), role)
	var h netns.NsHandle
	err := onFreshThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		h, err = netns.NewNamed(name)
		return errors.Join(err, netns.Set(orig))
	})
	if err != nil {
		_ = netns.DeleteNamed(name)
		return nil, fmt.Errorf("create netns %s: %w", name, err)
	}
	ns := &NetNS{Name: name, Path: "/run/netns/" + name, h: h}
	if ns.NL, err = netlink.NewHandleAt(h, unix.NETLINK_ROUTE); err != nil {
		_ = ns.Delete()
		return nil, fmt.Errorf("netlink in %s: %w", name, err)
	}
	lo, err := ns.NL.LinkByName("lo")
	if err == nil {
		err = ns.NL.LinkSetUp(lo)
	}
	if err != nil {
		_ = ns.Delete()
		return nil, fmt.Errorf("bring lo up in %s: %w", name, err)
	}
	return ns, nil
}

// Handle is the namespace's file handle (for netlink.NsFd and friends).
func (n *NetNS) Handle() netns.NsHandle { return n.h }

// Delete unmounts the namespace; the kernel then removes its links (and the
// peers of its veths). Safe to call twice.
func (n *NetNS) Delete() error {
	if n.closed.Swap(true) {
		return nil
	}
	if n.NL != nil {
		n.NL.Close()
	}
	if n.h.IsOpen() {
		n.h.Close()
	}
	if err := netns.DeleteNamed(n.Name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete netns %s: %w", n.Name, err)
	}
	return nil
}

// Do runs fn on an OS thread inside the namespace. Processes fn starts
// (a CNI plugin exec'd by libcni) are born in the namespace too.
func (n *NetNS) Do(fn func() error) error {
	return onFreshThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return fmt.Errorf("get current netns: %w", err)
		}
		defer orig.Close()
		if err := netns.Set(n.h); err != nil {
			return fmt.Errorf("enter netns %s: %w", n.Name, err)
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			return errors.Join(ferr, fmt.Errorf("leave netns %s: %w", n.Name, err))
		}
		return ferr
	})
}

// Sysctl writes one /proc/sys value inside the namespace.
func (n *NetNS) Sysctl(key, value string) error {
	return n.Do(func() error { return os.WriteFile("/proc/sys/"+key, []byte(value), 0o644) })
}

// onFreshThread runs fn on a goroutine locked to its thread. A thread left
// in the wrong namespace (fn returned an error after switching) is never
// unlocked, so Go discards it instead of reusing it.
func onFreshThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := fn()
		if err == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}
