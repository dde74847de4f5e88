// Package dataplane mirrors awssim's world in real network namespaces, so
// allot's agent, CNI plugin and the demo move real packets through a
// simulated VPC:
//
//   - one namespace per instance (node), holding a link per attached ENI that
//     carries the ENI's MAC; the primary ENI's link (eth0) gets the primary
//     address and a default route via the subnet gateway, as the VPC's DHCP
//     would give them; secondary ENIs' links (ethN) are left down and bare
//     for the agent to configure;
//   - a "VPC" namespace holding the other end of every ENI link. It is the
//     subnet router: it answers ARP for each subnet gateway and, by proxy
//     ARP, for every routed address; it routes each ENI's primary and
//     secondary addresses and delegated prefixes to that ENI's link, through
//     a permanent neighbour entry for the ENI's MAC, as the VPC fabric knows
//     which ENI owns what; and it drops packets whose source does not belong
//     to the ENI they came from (EC2's source/destination check), in an
//     nftables table;
//   - an "outside" namespace (203.0.113.10, a documentation address) behind
//     the VPC namespace, which only node primary addresses may talk to, so
//     pods reach it only through the agent's SNAT.
//
// The world's hooks only mark ENIs as changed; a worker reads each marked
// ENI's current state from the world and converges the kernel on it. Every
// namespace is named <Prefix>-vpc, <Prefix>-out or <Prefix>-<instance ID>,
// and nothing is created outside them.
package dataplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"

	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/internal/netnstest"
)

// World is what the plane reads of the simulated account; *world.World
// satisfies it. Only methods that take the world's lock without running
// hooks are used, so the worker can never deadlock against a hook.
type World interface {
	NetworkInterface(id string) (world.NetworkInterface, bool)
	AllNetworkInterfaces() []*world.NetworkInterface
	Instance(id string) (world.Instance, bool)
	Subnet(id string) (world.Subnet, bool)
}

var _ World = (*world.World)(nil)

// Config configures a Plane.
type Config struct {
	// Prefix starts every namespace name; it must be unique to the run
	// (e.g. "allot-demo-<random>") and is what Cleanup matches.
	Prefix string
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
}

// ErrClosed is returned by Sync after Close.
var ErrClosed = errors.New("dataplane is closed")

// Plane is a running simulated VPC data plane.
type Plane struct {
	prefix string
	log    *slog.Logger
	q      *queue

	vpc, out *netnstest.NS

	mu    sync.Mutex // guards nodes for NodeNetns; the worker alone writes it
	nodes map[string]*netnstest.NS

	enis map[string]*eniLink // worker only

	stop      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// New creates the VPC and outside namespaces and starts the worker. It
// refuses a prefix that already names a namespace (a parallel run, or a
// crashed one: see Cleanup). Register Hooks with the world and call Bind.
func New(cfg Config) (*Plane, error) {
	if err := checkPrefix(cfg.Prefix); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	left, err := ownedNamespaces(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	if len(left) > 0 {
		return nil, fmt.Errorf("dataplane prefix %q is in use (namespaces %v): pick another prefix, or call Cleanup if they are a crashed run's", cfg.Prefix, left)
	}
	p := &Plane{
		prefix: cfg.Prefix, log: log.With("component", "dataplane", "prefix", cfg.Prefix), q: newQueue(),
		nodes: map[string]*netnstest.NS{}, enis: map[string]*eniLink{},
		stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	if err := p.setupShared(); err != nil {
		close(p.stopped)
		return nil, errors.Join(err, p.Close())
	}
	go p.run()
	p.log.Info("dataplane ready", "vpc_netns", p.vpc.Path, "outside_netns", p.out.Path, "outside", outsideAddr)
	return p, nil
}

// Hooks returns the hooks that feed the plane: pass them to
// awssim.Config.Hooks or world.World.AddHooks. They only record which ENI
// changed and return at once.
func (p *Plane) Hooks() world.Hooks {
	return world.HookFuncs{
		Attach:           func(_ string, e world.NetworkInterface) { p.q.mark(e.ID) },
		Detach:           func(_ string, e world.NetworkInterface) { p.q.mark(e.ID) },
		AddressesChanged: func(e world.NetworkInterface) { p.q.mark(e.ID) },
	}
}

// Bind gives the plane the world it mirrors and brings every ENI the world
// holds up to date, so nothing that happened before is missed, whether the
// hooks were registered at awssim.Start (awssim.Config.Hooks, which sees the
// scenario's instances launch) or only just now. Call it once, and not from
// a hook.
func (p *Plane) Bind(w World) error {
	if err := p.q.bind(w); err != nil {
		return err
	}
	all := w.AllNetworkInterfaces()
	ids := make([]string, len(all))
	for i, e := range all {
		ids[i] = e.ID
	}
	p.q.mark(ids...)
	return nil
}

// Sync waits until every change marked before the call has reached the
// kernel, and returns the errors of the work done since the previous Sync.
func (p *Plane) Sync(ctx context.Context) error {
	target, _, bound, _ := p.q.state()
	if !bound {
		return errors.New("dataplane: Sync before Bind: the plane cannot read the world yet")
	}
	for {
		_, applied, _, progress := p.q.state()
		if applied >= target {
			return p.q.takeErrs()
		}
		select {
		case <-progress:
		case <-p.stopped:
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("dataplane sync: %w", ctx.Err())
		}
	}
}

// NodeNetns returns the path of the instance's namespace (for
// hostnet.Config.NodeNetNS, or `ip netns exec` with its base name), or ""
// if the plane has not created it (yet).
func (p *Plane) NodeNetns(instanceID string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, ok := p.nodes[instanceID]; ok {
		return n.Path
	}
	return ""
}

// VPCNetns returns the path of the VPC router's namespace.
func (p *Plane) VPCNetns() string { return p.vpc.Path }

// OutsideNetns returns the path of the outside host's namespace, where a
// test or the demo runs the server that pods must reach through SNAT.
func (p *Plane) OutsideNetns() string { return p.out.Path }

// OutsideAddr is the outside host's address (the same for every plane:
// each has its own namespaces).
func (p *Plane) OutsideAddr() netip.Addr { return outsideAddr }

// Prefix returns the namespace name prefix.
func (p *Plane) Prefix() string { return p.prefix }

func (p *Plane) nsName(suffix string) string { return p.prefix + "-" + suffix }

// Close stops the worker and deletes every namespace the plane created,
// which takes every link with it. It is safe to call more than once.
func (p *Plane) Close() error {
	p.closeOnce.Do(func() {
		p.q.close()
		close(p.stop)
		<-p.stopped
		var errs []error
		p.mu.Lock()
		for id, n := range p.nodes {
			errs = append(errs, n.Delete())
			delete(p.nodes, id)
		}
		p.mu.Unlock()
		for _, n := range []*netnstest.NS{p.vpc, p.out} {
			if n != nil {
				errs = append(errs, n.Delete())
			}
		}
		clear(p.enis)
		p.closeErr = errors.Join(errs...)
		p.log.Info("dataplane closed", "err", p.closeErr)
	})
	return p.closeErr
}

// run is the worker: one pass per wake-up over everything marked since.
func (p *Plane) run() {
	defer close(p.stopped)
	for {
		select {
		case <-p.stop:
			return
		case <-p.q.wake:
		}
		w, ids, upTo := p.q.take()
		if w == nil {
			continue
		}
		errs := p.apply(w, ids)
		for _, err := range errs {
			p.log.Error("dataplane update failed", "err", err)
		}
		p.q.done(upTo, errs)
	}
}

// apply converges the kernel on the world's current state of ids, then
// rewrites the nftables rules if any link's addresses changed, then
// deletes the namespaces of instances that are gone. Stale links go first,
// so an ENI attached at a device index another one just left finds it free.
func (p *Plane) apply(w World, ids []string) []error {
	var errs []error
	rulesDirty := false
	views := make([]world.NetworkInterface, len(ids))
	for i, id := range ids {
		e, ok := w.NetworkInterface(id)
		if !ok {
			e = world.NetworkInterface{ID: id} // deleted: attached nowhere
		}
		views[i] = e
		changed, err := p.removeStale(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("eni %s: %w", id, err))
		}
		rulesDirty = rulesDirty || changed
	}
	for _, e := range views {
		changed, err := p.syncAttached(w, e)
		if err != nil {
			errs = append(errs, fmt.Errorf("eni %s: %w", e.ID, err))
		}
		rulesDirty = rulesDirty || changed
	}
	if rulesDirty {
		if err := p.writeRules(); err != nil {
			errs = append(errs, err)
		}
	}
	return append(errs, p.collectNodes(w)...)
}

// collectNodes deletes the namespace of every instance the world no longer
// has once none of its ENI links is left.
func (p *Plane) collectNodes(w World) []error {
	used := map[string]bool{}
	for _, l := range p.enis {
		used[l.instanceID] = true
	}
	var errs []error
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, n := range p.nodes {
		if used[id] {
			continue
		}
		if _, ok := w.Instance(id); ok {
			continue
		}
		if err := n.Delete(); err != nil {
			errs = append(errs, fmt.Errorf("instance %s: %w", id, err))
			continue
		}
		delete(p.nodes, id)
		p.log.Info("node namespace deleted", "instance", id, "netns", n.Name)
	}
	return errs
}

// ensureNode returns the instance's namespace, creating it on first use.
func (p *Plane) ensureNode(instanceID string) (*netnstest.NS, error) {
	p.mu.Lock()
	n, ok := p.nodes[instanceID]
	p.mu.Unlock()
	if ok {
		return n, nil
	}
	n, err := netnstest.Create(p.nsName(instanceID))
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.nodes[instanceID] = n
	p.mu.Unlock()
	p.log.Info("node namespace created", "instance", instanceID, "netns", n.Path)
	return n, nil
}
