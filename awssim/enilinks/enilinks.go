// Package enilinks gives awssim without its data plane what an agent run by
// hand needs from the kernel: a link (a veth whose unused peer stays beside
// it) for every ENI attached to an instance,
// carrying the ENI's MAC, in a network namespace that stands for that
// instance. The agent finds an ENI's device by MAC and waits until one
// shows up; on EC2 the hypervisor plugs it in, here awssim does.
// Links go away on detach and when the Linker closes. Nothing else (no
// addresses, no routing between nodes) is simulated: that is
// awssim/dataplane's job.
package enilinks

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/allotnet/allot/awssim/world"
)

// Linker keeps ENI links in each assigned instance's namespace. It is a
// world.Hooks; register it with World.AddHooks, then Sync the ENIs
// attached before.
type Linker struct {
	log *slog.Logger

	mu      sync.Mutex
	nsPaths map[string]string   // instance ID -> namespace path
	made    map[string]madeLink // ENI ID -> the link made for it
}

type madeLink struct {
	nsPath, name string
}

var _ world.Hooks = (*Linker)(nil)

// New returns a Linker for instances (instance ID -> namespace path, e.g.
// /run/netns/allot-node). A nil logger discards.
func New(instances map[string]string, log *slog.Logger) *Linker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ns := make(map[string]string, len(instances))
	for k, v := range instances {
		ns[k] = v
	}
	return &Linker{log: log, nsPaths: ns, made: map[string]madeLink{}}
}

// Sync makes the links of the ENIs already attached to insts.
func (l *Linker) Sync(insts []world.Instance) error {
	var errs []error
	for _, inst := range insts {
		for _, e := range inst.NetworkInterfaces {
			if err := l.add(inst.ID, e); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// OnAttach makes the attached ENI's link.
func (l *Linker) OnAttach(instanceID string, eni world.NetworkInterface) {
	if err := l.add(instanceID, eni); err != nil {
		l.log.Error("eni link", "eni", eni.ID, "instance", instanceID, "err", err)
	}
}

// OnDetach removes the ENI's link.
func (l *Linker) OnDetach(_ string, eni world.NetworkInterface) {
	l.mu.Lock()
	m, ok := l.made[eni.ID]
	delete(l.made, eni.ID)
	l.mu.Unlock()
	if ok {
		if err := del(m); err != nil {
			l.log.Error("eni link", "eni", eni.ID, "err", err)
		}
	}
}

// OnAddressesChanged does nothing: the agent adds addresses itself.
func (l *Linker) OnAddressesChanged(world.NetworkInterface) {}

// Close removes every link the Linker made.
func (l *Linker) Close() error {
	l.mu.Lock()
	made := l.made
	l.made = map[string]madeLink{}
	l.mu.Unlock()
	var errs []error
	for _, m := range made {
		errs = append(errs, del(m))
	}
	return errors.Join(errs...)
}

func (l *Linker) add(instanceID string, eni world.NetworkInterface) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	path, ok := l.nsPaths[instanceID]
	if !ok || eni.Attachment == nil {
		return nil
	}
	if _, done := l.made[eni.ID]; done {
		return nil
	}
	mac, err := net.ParseMAC(eni.MAC)
	if err != nil {
		return fmt.Errorf("eni %s: mac %q: %w", eni.ID, eni.MAC, err)
	}
	name := fmt.Sprintf("eth%d", eni.Attachment.DeviceIndex)
	err = inNS(path, func(h *netlink.Handle) error {
		// A veth pair rather than a dummy: veth is built into every kernel
		// that runs containers, the dummy module often is not. The peer
		// stays in the same namespace and is never used.
		link := &netlink.Veth{
			LinkAttrs: netlink.LinkAttrs{Name: name, HardwareAddr: mac},
			PeerName:  peerName(eni.Attachment.DeviceIndex),
		}
		if err := h.LinkAdd(link); err != nil {
			return fmt.Errorf("add %s (%s) in %s: %w", name, mac, path, err)
		}
		if peer, err := h.LinkByName(link.PeerName); err == nil {
			_ = h.LinkSetUp(peer) // so the ENI's link is fully up, as on EC2
		}
		return h.LinkSetUp(link)
	})
	if err != nil {
		return fmt.Errorf("eni %s: %w", eni.ID, err)
	}
	l.made[eni.ID] = madeLink{nsPath: path, name: name}
	l.log.Info("eni link", "eni", eni.ID, "instance", instanceID, "link", name, "mac", eni.MAC, "netns", path)
	return nil
}

func del(m madeLink) error {
	return inNS(m.nsPath, func(h *netlink.Handle) error {
		link, err := h.LinkByName(m.name)
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find %s in %s: %w", m.name, m.nsPath, err)
		}
		return h.LinkDel(link)
	})
}

func peerName(device int) string { return fmt.Sprintf("eth%d-peer", device) }

// inNS runs f with a netlink handle bound to the namespace at path; no
// thread changes namespace.
func inNS(path string, f func(*netlink.Handle) error) error {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", path, err)
	}
	defer h.Close()
	return f(h)
}
