package hostnet

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Config configures the Linux host network.
type Config struct {
	// NodeNetNS is the path of the node's network namespace; empty means
	// the namespace of the agent process itself. Tests and the demo run a
	// node per namespace.
	NodeNetNS string
	// LinkWait bounds how long SetupENI waits for a just-attached ENI's link
	// to appear. Zero means 5 s.
	LinkWait time.Duration
	// ProcSys is where /proc/sys is readable and writable; empty means
	// /proc/sys. A container's own /proc/sys is read-only, so the agent's
	// DaemonSet mounts the host's /proc/sys/net elsewhere and names it here.
	ProcSys string
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
}

// Linux is the Network implementation that programs the kernel through
// netlink and nftables, inside the node's network namespace.
type Linux struct {
	linkWait time.Duration
	log      *slog.Logger
	procSys  string

	nodeNS netns.NsHandle
	nl     *netlink.Handle // rtnetlink socket bound to nodeNS

	mu sync.Mutex
	// settingUp counts SetupPod calls in flight per host veth, so a
	// Reconcile running at the same time never reports their devices stray.
	settingUp map[string]int
	// snatMu serialises SNAT rebuilds: each is a read-compare-write.
	snatMu sync.Mutex
	// forwarding records that IPv4 forwarding has been switched on.
	forwarding atomic.Bool
}

var _ Network = (*Linux)(nil)

// New opens the node namespace and a netlink handle inside it. Close
// releases both.
func New(cfg Config) (*Linux, error) {
	path := cfg.NodeNetNS
	if path == "" {
		// The thread group leader's namespace, rather than whatever
		// namespace the calling thread happens to be in.
		path = "/proc/self/ns/net"
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open node netns %s: %w", path, err)
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("open netlink handle in node netns %s: %w", path, err)
	}
	l := &Linux{
		linkWait:  cfg.LinkWait,
		log:       cfg.Logger,
		procSys:   cfg.ProcSys,
		nodeNS:    ns,
		nl:        h,
		settingUp: map[string]int{},
	}
	if l.linkWait == 0 {
		l.linkWait = 5 * time.Second
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.procSys == "" {
		l.procSys = "/proc/sys"
	}
	return l, nil
}

// Close releases the netlink handle and the namespace handle.
func (l *Linux) Close() error {
	l.nl.Close()
	return l.nodeNS.Close()
}

// inNetNS runs fn on an OS thread switched into ns. The work happens on a
// fresh goroutine locked to its thread; if the thread cannot be switched
// back it stays locked, so Go discards it when the goroutine ends instead of
// reusing a thread that sits in the wrong namespace.
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
			errc <- fmt.Errorf("enter netns %v: %w", ns, err)
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

// retryDump repeats a netlink dump that the kernel interrupted because the
// table changed underneath it; a partial dump would make Reconcile call
// live devices stray.
func retryDump[T any](dump func() (T, error)) (T, error) {
	var v T
	var err error
	for range 5 {
		v, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, fmt.Errorf("netlink dump kept being interrupted: %w", err)
}

func isNotFound(err error) bool {
	var lnf netlink.LinkNotFoundError
	return errors.As(err, &lnf) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) ||
		errors.Is(err, unix.ENODEV)
}

// beginSetup marks a host veth as being set up until the returned func runs.
func (l *Linux) beginSetup(name string) func() {
	l.mu.Lock()
	l.settingUp[name]++
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		if l.settingUp[name]--; l.settingUp[name] <= 0 {
			delete(l.settingUp, name)
		}
		l.mu.Unlock()
	}
}

func (l *Linux) isSettingUp(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.settingUp[name] > 0
}
