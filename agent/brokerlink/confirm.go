package brokerlink

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/allotnet/allot/agent/hostnet"
	"github.com/allotnet/allot/agent/identity"
	"github.com/allotnet/allot/agent/pool"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// confirmer adds delivered addresses to the pool once IMDS shows them on
// the ENI. The broker's record says EC2 assigned them; IMDS lags EC2, and it
// is what the instance itself sees, so an address is handed to a pod only
// when both agree. An ENI new to this process is first set up on the host
// (link up, route table) and recorded in the pool.
type confirmer struct {
	l *Link

	mu      sync.Mutex
	pending map[string]*pendingENI
	running map[string]bool
	ready   map[string]bool // ENIs set up by this process
	ctx     context.Context
	wg      sync.WaitGroup
}

type pendingENI struct {
	eni      brokerENI
	addrs    []netip.Addr
	prefixes []netip.Prefix
}

func (p *pendingENI) empty() bool { return len(p.addrs) == 0 && len(p.prefixes) == 0 }

func newConfirmer(l *Link) *confirmer {
	c := &confirmer{l: l, pending: map[string]*pendingENI{}, running: map[string]bool{}, ready: map[string]bool{},
		ctx: context.Background()}
	for _, id := range l.cfg.PreparedENIs {
		c.ready[id] = true
	}
	return c
}

// start sets the context the workers run under.
func (c *confirmer) start(ctx context.Context) {
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
}

// want replaces what is awaited for an ENI with the latest record's missing
// addresses (so one the broker took back before IMDS showed it is never
// added) and makes sure a worker is on it. An ENI this process has not set
// up gets a worker even with nothing missing: pods restored on it need its
// host side.
func (c *confirmer) want(e brokerENI, addrs []netip.Addr, prefixes []netip.Prefix) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &pendingENI{eni: e, addrs: addrs, prefixes: prefixes}
	if p.empty() && c.ready[e.id] {
		delete(c.pending, e.id)
		return
	}
	c.pending[e.id] = p
	if c.running[e.id] || c.ctx.Err() != nil {
		return
	}
	c.running[e.id] = true
	ctx := c.ctx
	c.wg.Go(func() { c.work(ctx, e.id) })
}

// drop forgets what was awaited for an ENI the broker no longer lists.
func (c *confirmer) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, id)
}

// wait waits for the workers to stop (after their context ended).
func (c *confirmer) wait() { c.wg.Wait() }

// count returns how many addresses wait for IMDS.
func (c *confirmer) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range c.pending {
		n += allotv1.PodAddresses(len(p.addrs), len(p.prefixes))
	}
	return n
}

func (c *confirmer) next(id string) (pendingENI, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pending[id]
	if !ok || (p.empty() && c.ready[id]) {
		delete(c.pending, id)
		c.running[id] = false
		return pendingENI{}, false
	}
	return *p, true
}

// work confirms one ENI's addresses until none is awaited.
func (c *confirmer) work(ctx context.Context, id string) {
	l := c.l
	for {
		p, ok := c.next(id)
		if !ok {
			return
		}
		err := c.confirmOnce(ctx, p)
		if err == nil {
			continue // all confirmed: look again at once for newer deliveries
		}
		l.log.Debug("delivered addresses not confirmed yet", "eni", id, "err", err)
		select {
		case <-ctx.Done():
			c.mu.Lock()
			c.running[id] = false
			c.mu.Unlock()
			return
		case <-time.After(l.cfg.ConfirmInterval):
		}
	}
}

// confirmOnce sets the ENI up if needed, asks IMDS which of p's addresses
// it shows, and adds those to the pool. It returns an error while anything
// of p is still unconfirmed, so the caller waits before asking again.
func (c *confirmer) confirmOnce(ctx context.Context, p pendingENI) error {
	l := c.l
	if err := c.prepare(ctx, p.eni); err != nil {
		return err
	}
	if p.empty() {
		return nil
	}
	missA, missP, err := identity.Unconfirmed(ctx, l.imds, p.eni.mac, p.addrs, p.prefixes)
	if err != nil {
		return err
	}
	seenA := slices.DeleteFunc(slices.Clone(p.addrs), func(a netip.Addr) bool { return slices.Contains(missA, a) })
	seenP := slices.DeleteFunc(slices.Clone(p.prefixes), func(x netip.Prefix) bool { return slices.Contains(missP, x) })
	if len(seenA)+len(seenP) == 0 {
		return fmt.Errorf("imds doesn't show %d addresses and %d prefixes yet", len(missA), len(missP))
	}

	l.applyMu.Lock()
	defer l.applyMu.Unlock()
	// An address moves from awaited to the pool under seenMu, so a demand
	// never sees it in neither.
	l.seenMu.Lock()
	defer l.seenMu.Unlock()
	// The record may have changed while IMDS was asked: add only what is
	// still awaited, and nothing the pool holds on another ENI.
	c.mu.Lock()
	cur := c.pending[p.eni.id]
	c.mu.Unlock()
	if cur == nil {
		return nil
	}
	onOther := map[netip.Addr]string{}
	for _, v := range l.pool.View() {
		if v.ID == p.eni.id {
			continue
		}
		for _, a := range v.Addrs {
			onOther[a.Addr] = v.ID
		}
	}
	var addA []netip.Addr
	var addP []netip.Prefix
	for _, a := range seenA {
		if slices.Contains(cur.addrs, a) && onOther[a] == "" {
			addA = append(addA, a)
		}
	}
	for _, x := range seenP {
		if slices.Contains(cur.prefixes, x) && onOther[x.Addr()] == "" {
			addP = append(addP, x)
		}
	}
	if len(addA)+len(addP) > 0 {
		n, err := l.pool.AddCapacity(p.eni.id, addA, addP)
		if err != nil {
			return fmt.Errorf("add confirmed capacity: %w", err)
		}
		l.log.Info("delivered addresses confirmed in IMDS", "eni", p.eni.id, "added", n)
	}
	c.mu.Lock()
	if cur := c.pending[p.eni.id]; cur != nil {
		cur.addrs = slices.DeleteFunc(cur.addrs, func(a netip.Addr) bool { return slices.Contains(seenA, a) })
		cur.prefixes = slices.DeleteFunc(cur.prefixes, func(x netip.Prefix) bool { return slices.Contains(seenP, x) })
	}
	c.mu.Unlock()
	// The demand counted these as on their way; now the pool has them.
	poke(l.recalc)
	if len(missA)+len(missP) > 0 {
		return fmt.Errorf("imds doesn't show %d addresses and %d prefixes yet", len(missA), len(missP))
	}
	return nil
}

// prepare sets up an ENI new to this process: IMDS must show it (it lags an
// attach too) under the ID the broker gives; then the host side is set up
// and the ENI recorded in the pool, before any of its addresses can be.
func (c *confirmer) prepare(ctx context.Context, e brokerENI) error {
	c.mu.Lock()
	done := c.ready[e.id]
	c.mu.Unlock()
	if done {
		return nil
	}
	l := c.l
	meta, err := identity.ENI(ctx, l.imds, e.mac)
	if errors.Is(err, identity.ErrNotFound) {
		return fmt.Errorf("imds doesn't show eni %s (%s) yet", e.id, e.mac)
	}
	if err != nil {
		return err
	}
	if meta.ENIID != e.id {
		return fmt.Errorf("imds shows MAC %s as %s, the broker says %s", e.mac, meta.ENIID, e.id)
	}
	primaryIP, _ := meta.PrimaryIPv4()
	err = l.enis.SetupENI(hostnet.ENIConfig{
		MAC: meta.MAC, DeviceIndex: meta.DeviceNumber, PrimaryIP: primaryIP, Subnet: meta.SubnetCIDR, MTU: l.cfg.MTU,
	})
	if err != nil {
		return fmt.Errorf("set up eni %s: %w", e.id, err)
	}
	err = l.pool.AddENI(pool.ENI{
		ID: e.id, MAC: meta.MAC, DeviceIndex: meta.DeviceNumber, Primary: meta.DeviceNumber == 0,
		SubnetID: meta.SubnetID, SubnetCIDR: meta.SubnetCIDR, PrimaryIP: primaryIP,
	})
	if err != nil {
		return fmt.Errorf("record eni %s: %w", e.id, err)
	}
	c.mu.Lock()
	c.ready[e.id] = true
	c.mu.Unlock()
	l.log.Info("ENI set up", "eni", e.id, "mac", meta.MAC, "device_index", meta.DeviceNumber)
	if l.cfg.OnENIReady != nil {
		l.cfg.OnENIReady(e.id)
	}
	return nil
}
