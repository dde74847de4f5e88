package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/allotnet/allot/agent/brokerlink"
	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/hostnet"
	"github.com/allotnet/allot/agent/identity"
	"github.com/allotnet/allot/agent/pool"
)

// ErrCheckpoint wraps every reason Start refuses a checkpoint file. The
// file is left exactly as found: a restart must never free what pods use,
// and an agent that can't read its records can't know what that is.
var ErrCheckpoint = errors.New("refusing to start: the checkpoint cannot be trusted")

// Start restores the agent: load the checkpoint (missing means a first
// start; unreadable means refuse, file untouched), read the node's identity
// from IMDS, restore the pool, set up the ENIs IMDS shows and the SNAT
// rules, restore the host network of every recorded pod, and replay the
// plugin's DEL queue. Nothing is ever freed here: records are restored, and
// devices no record accounts for are only reported (GC removes them). After
// Start the CNI methods serve; Run adds the broker link and the sockets.
// Calling Start again returns the first call's result.
func (a *Agent) Start(ctx context.Context) error {
	a.started.Do(func() { a.startErr = a.start(ctx) })
	return a.startErr
}

func (a *Agent) start(ctx context.Context) error {
	st, err := a.ckpt.Load()
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		a.log.Info("no checkpoint; first start", "path", a.cfg.CheckpointPath)
		st = checkpoint.State{}
		if err := os.MkdirAll(filepath.Dir(a.cfg.CheckpointPath), 0o700); err != nil {
			return fmt.Errorf("create checkpoint directory: %w", err)
		}
	case err != nil:
		return fmt.Errorf("%w: %w (the file is left as it is; if no pod on this node uses its addresses, "+
			"move it aside and restart)", ErrCheckpoint, err)
	}

	id, err := identity.Fetch(ctx, a.deps.IMDS)
	if err != nil {
		return fmt.Errorf("read node identity from IMDS: %w", err)
	}
	a.ident = id
	primary, _ := id.Primary()

	var store pool.Persister = timedStore{a.ckpt, a.tel}
	if a.wrapStore != nil {
		store = a.wrapStore(store)
	}
	p, err := pool.New(pool.Config{
		InstanceID: id.InstanceID, Cooldown: a.cfg.Cooldown, MaxWait: a.cfg.MaxAddWait, RetryLinger: a.cfg.RetryLinger,
		Store: store, Clock: a.clock, Logger: a.deps.Logger,
	}, st)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	a.pool = p
	a.log.Info("pool restored", "instance", id.InstanceID, "type", id.InstanceType,
		"enis", len(st.ENIs), "addresses", len(st.Addresses), "pods", len(st.Allocations))

	prepared, err := a.setupENIs(id)
	if err != nil {
		return err
	}
	if err := a.net.SetupSNAT(a.snatConfig(primary)); err != nil {
		return fmt.Errorf("set up SNAT: %w", err)
	}
	a.restorePods()

	a.arrival = newArrival(a, prepared)
	a.link, err = brokerlink.New(brokerlink.Config{
		Identity: id, NodeName: a.cfg.NodeName, PrefixMode: a.cfg.Mode == ModePrefix, Targets: a.cfg.Warm, Limits: a.cfg.Limits,
		UsageInterval: a.cfg.UsageInterval, HeartbeatInterval: a.cfg.HeartbeatInterval,
		DemandInterval: a.cfg.DemandInterval, Logger: a.deps.Logger,
	}, brokerlink.Deps{Client: a.deps.Broker, Pool: p, Arrivals: a.arrival, Waiting: a.waiting.oldest})
	if err != nil {
		return err
	}
	a.arrival.changed = a.link.Recalc

	a.ready.Store(true)
	if a.cfg.DelQueueDir != "" {
		a.replayDelQueue(ctx)
	}
	a.up.Store(true)
	a.log.Info("agent ready", "mode", a.cfg.Mode, "cooldown", a.cfg.Cooldown, "max_add_wait", a.cfg.MaxAddWait)
	return nil
}

// setupENIs sets up the host side of every ENI IMDS shows and records them
// in the pool (the primary always; others only if the pool knows them
// already — the broker link adds new ones once their addresses arrive). An
// ENI that fails is logged, not fatal: pods on the other ENIs must still
// come back. It returns the ENIs both set up and recorded in the pool.
func (a *Agent) setupENIs(id identity.Identity) (prepared []string, err error) {
	for _, m := range id.ENIs {
		primaryIP, _ := m.PrimaryIPv4()
		e := pool.ENI{ID: m.ENIID, MAC: m.MAC, DeviceIndex: m.DeviceNumber, Primary: m.MAC == id.PrimaryMAC,
			SubnetID: m.SubnetID, SubnetCIDR: m.SubnetCIDR, PrimaryIP: primaryIP}
		err := a.net.SetupENI(hostnet.ENIConfig{
			MAC: m.MAC, DeviceIndex: m.DeviceNumber, PrimaryIP: primaryIP, Subnet: m.SubnetCIDR, MTU: a.cfg.MTU,
		})
		if err != nil {
			a.log.Error("cannot set up ENI; pods on it may not be restored", "eni", m.ENIID, "mac", m.MAC, "err", err)
			continue
		}
		if _, known := a.pool.ENI(m.ENIID); !known && !e.Primary {
			// Not ours yet (attached while the agent was down, or its
			// addresses not confirmed before a restart): the broker link
			// records it in the pool when the broker's record names it, so
			// it must not count as prepared here.
			continue
		}
		if err := a.pool.AddENI(e); err != nil {
			return nil, fmt.Errorf("record eni %s: %w", m.ENIID, err)
		}
		prepared = append(prepared, m.ENIID)
	}
	for _, e := range a.pool.ENIs() {
		if !slices.ContainsFunc(id.ENIs, func(m identity.ENIMeta) bool { return m.ENIID == e.ID }) {
			a.log.Warn("checkpointed ENI is not attached according to IMDS (yet); its records are kept", "eni", e.ID)
		}
	}
	return prepared, nil
}

// onENIReady restores the pods recorded on an ENI the broker link just set
// up: one IMDS did not show at start could not be wired then.
func (a *Agent) onENIReady(eniID string) {
	if !slices.ContainsFunc(a.pool.Allocations(), func(al pool.Allocation) bool { return al.ENIID == eniID }) {
		return
	}
	a.netMu.Lock()
	defer a.netMu.Unlock()
	a.log.Info("ENI set up late; restoring its pods", "eni", eniID)
	a.restorePods()
}

func (a *Agent) snatConfig(primary identity.ENIMeta) hostnet.SNATConfig {
	if a.cfg.ExternalSNAT {
		return hostnet.SNATConfig{External: true}
	}
	return hostnet.SNATConfig{
		PrimaryMAC:   primary.MAC,
		PrimaryIP:    a.ident.PrimaryIPv4,
		VPCCIDRs:     primary.VPCCIDRs,
		ExcludeCIDRs: a.cfg.SNATExcludeCIDRs,
	}
}

// restorePods gives every recorded pod its missing host pieces back and
// reports what the host has that no record accounts for. It removes
// nothing: pieces no record accounts for may be a released pod whose
// teardown a crash interrupted (a DEL is answered before its teardown is
// done), but they may as well be a live pod whose record this checkpoint
// lacks, so only the runtime's GC removes them. Meanwhile the addresses
// they route are held back (holdStrayAddresses).
func (a *Agent) restorePods() {
	rep, err := a.net.Reconcile(a.desiredPods())
	if err != nil {
		a.log.Error("restoring pod networks failed; records are kept", "err", err)
		return
	}
	for _, r := range rep.Repaired {
		a.log.Info("pod network restored", "attachment", r.Attachment.String(), "missing", r.Missing)
	}
	for _, f := range rep.Failed {
		a.log.Error("pod network could not be restored; record kept", "attachment", f.Attachment.String(), "err", f.Err)
	}
	for _, g := range rep.NetNSGone {
		a.log.Warn("recorded pod's namespace is gone; record kept until its DEL", "attachment", g.String())
	}
	if n := len(rep.StrayLinks) + len(rep.StrayRules) + len(rep.StrayRoutes); n > 0 {
		a.log.Warn("host has pod devices no record accounts for; CNI GC removes them",
			"links", len(rep.StrayLinks), "rules", len(rep.StrayRules), "routes", len(rep.StrayRoutes))
	}
	a.holdStrayAddresses()
}

// holdStrayAddresses holds back every pool address that a host veth no
// record accounts for still routes, so no ADD is given it while that veth
// exists; the next GC that removes such veths lets them go.
func (a *Agent) holdStrayAddresses() {
	host, err := a.net.ListPods()
	if err != nil {
		a.log.Warn("listing host veths failed; addresses they route are not held back", "err", err)
		return
	}
	recorded := map[string]bool{}
	for _, c := range a.desiredPods() {
		recorded[hostnet.HostVethName(c.Attachment)] = true
	}
	for _, p := range host {
		if recorded[p.HostVeth] {
			continue
		}
		for _, addr := range p.Addresses {
			if unhold, ok := a.pool.HoldBack(addr); ok {
				a.heldTeardowns.add(p.HostVeth+" "+addr.String(), unhold)
				a.log.Warn("address routed to a veth no record accounts for; held back until CNI GC removes the veth",
					"addr", addr, "host_veth", p.HostVeth)
			}
		}
	}
}

// desiredPods is every recorded attachment as the host network needs it.
func (a *Agent) desiredPods() []hostnet.PodConfig {
	als := a.pool.Allocations()
	out := make([]hostnet.PodConfig, 0, len(als))
	for _, al := range als {
		out = append(out, a.podConfig(al, al.Netns))
	}
	return out
}

func (a *Agent) podConfig(al pool.Allocation, netns string) hostnet.PodConfig {
	e, _ := a.pool.ENI(al.ENIID)
	return hostnet.PodConfig{
		Attachment:  attachment(al.Key),
		NetNS:       netns,
		Address:     al.Addr,
		DeviceIndex: e.DeviceIndex,
		MTU:         a.cfg.MTU,
	}
}

func attachment(k pool.Key) hostnet.Attachment {
	return hostnet.Attachment{Network: k.Network, ContainerID: k.ContainerID, IfName: k.IfName}
}
