package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/allotnet/allot/agent/brokerlink"
	"github.com/allotnet/allot/agent/hostnet"
	"github.com/allotnet/allot/agent/identity"
	"github.com/allotnet/allot/agent/pool"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// arrival brings delivered addresses into the pool: it is the link's
// brokerlink.Arrivals. The broker's record lists an address only after
// EC2 answered the call that assigned it (or EC2 described it), and EC2's
// answer is what decides: so an address delivered on an ENI this process
// has set up goes into the pool at once, without waiting for IMDS, which
// lags EC2. An ENI new to this process still waits until IMDS shows it:
// its device and MAC are needed to set up the host side (link up, route
// table) and record it in the pool, and the agent then restores pods
// recorded on it. A background check (imdscheck.go) asks IMDS later and
// logs and counts addresses it still doesn't show.
//
// mu is held while an address moves from awaited into the pool, so Await
// (which the link calls before it drops what the broker stopped listing)
// never lets an address in behind the broker's back, and Hold sees every
// address in exactly one of the two.
type arrival struct {
	pool     *pool.Pool
	imds     identity.MetadataAPI
	net      hostnet.Network
	mtu      int
	interval time.Duration
	log      *slog.Logger
	// onReady is called after an ENI was set up; changed after what is
	// awaited changed without the pool changing.
	onReady func(eniID string)
	changed func()
	// delivering is called just before delivered addresses join the pool;
	// the function it returns is told how many did, on which ENI, and
	// since when they were being confirmed.
	delivering func() func(eniID string, added int, since time.Time)
	// check asks IMDS, checkAfter after addresses joined the pool, whether
	// it shows them; a negative checkAfter turns it off.
	checkAfter time.Duration
	disagreed  atomic.Int64

	mu      sync.Mutex
	pending map[string]*brokerlink.Delivery
	running map[string]bool
	ready   map[string]bool // ENIs set up by this process
	ctx     context.Context
	wg      sync.WaitGroup
}

var _ brokerlink.Arrivals = (*arrival)(nil)

func newArrival(a *Agent, prepared []string) *arrival {
	c := &arrival{pool: a.pool, imds: a.deps.IMDS, net: a.net, mtu: a.cfg.MTU, interval: a.cfg.ConfirmInterval,
		log: a.deps.Logger.With("component", "arrival"), onReady: a.onENIReady, changed: func() {}, delivering: a.traceDelivery,
		pending: map[string]*brokerlink.Delivery{}, running: map[string]bool{}, ready: map[string]bool{},
		ctx: context.Background()}
	if c.interval <= 0 {
		c.interval = DefaultConfirmInterval
	}
	c.checkAfter = cmp.Or(a.cfg.IMDSCheckAfter, DefaultIMDSCheckAfter)
	for _, id := range prepared {
		c.ready[id] = true
	}
	return c
}

// DefaultConfirmInterval is how often IMDS is asked again about an ENI new
// to this process that it doesn't show yet (more often at first:
// confirmWait).
const DefaultConfirmInterval = 200 * time.Millisecond

// IMDS shows an attach about a second after EC2 made it, so a new ENI's
// addresses reach the pool that second plus however long the agent takes
// to ask again: up to a whole interval, half of one on average, and the
// last new ENI of a burst is what its last pods wait for. So for the first
// confirmFastFor intervals (2 s at the default) of asking about an ENI the
// agent asks confirmSpeedup times as often. A "not yet" costs one small
// IMDS request (the ENI's interface-id, not found).
const (
	confirmFastFor = 10
	confirmSpeedup = 4
)

// confirmWait is how long to wait before asking IMDS again about an ENI
// first asked about elapsed ago.
func confirmWait(elapsed, interval time.Duration) time.Duration {
	if elapsed < confirmFastFor*interval {
		return max(interval/confirmSpeedup, time.Millisecond)
	}
	return interval
}

// start sets the context the workers run under; call it before anything
// is awaited.
func (c *arrival) start(ctx context.Context) {
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
}

// wait waits for the workers to stop (after their context ended).
func (c *arrival) wait() { c.wg.Wait() }

func empty(d *brokerlink.Delivery) bool { return len(d.Addrs) == 0 && len(d.Prefixes) == 0 }

// Await replaces what is awaited for an ENI with the latest record's
// missing addresses (so one the broker took back before IMDS showed it is
// never added) and makes sure a worker is on it. An ENI this process has
// not set up gets a worker even with nothing missing: pods restored on it
// need its host side.
func (c *arrival) Await(d brokerlink.Delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if empty(&d) && c.ready[d.ENIID] {
		delete(c.pending, d.ENIID)
		return
	}
	c.pending[d.ENIID] = &d
	if c.running[d.ENIID] || c.ctx.Err() != nil {
		return
	}
	c.running[d.ENIID] = true
	ctx := c.ctx
	c.wg.Go(func() { c.work(ctx, d.ENIID) })
}

// Forget drops what was awaited for an ENI the broker no longer lists.
func (c *arrival) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, id)
}

// Hold calls f with the number of addresses awaited while none moves into
// the pool.
func (c *arrival) Hold(f func(awaited int)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range c.pending {
		n += allotv1.PodAddresses(len(p.Addrs), len(p.Prefixes))
	}
	f(n)
}

func (c *arrival) next(id string) (brokerlink.Delivery, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pending[id]
	if !ok || (empty(p) && c.ready[id]) {
		delete(c.pending, id)
		c.running[id] = false
		return brokerlink.Delivery{}, false
	}
	return *p, true
}

// work confirms one ENI's addresses until none is awaited.
func (c *arrival) work(ctx context.Context, id string) {
	since := time.Now()
	asking := since // since when what is awaited now was first asked about
	for {
		p, ok := c.next(id)
		if !ok {
			return
		}
		err := c.confirmOnce(ctx, p, since)
		if err == nil {
			since = time.Now()
			asking = since
			continue // all confirmed: look again at once for newer deliveries
		}
		c.log.Debug("delivered addresses not confirmed yet", "eni", id, "err", err)
		select {
		case <-ctx.Done():
			c.mu.Lock()
			c.running[id] = false
			c.mu.Unlock()
			return
		case <-time.After(confirmWait(time.Since(asking), c.interval)):
		}
	}
}

// confirmOnce sets the ENI up if needed (waiting for IMDS to show an ENI
// new to this process) and adds p's addresses to the pool from the
// broker's record. It returns an error while the ENI can't be set up yet,
// so the caller waits before trying again.
func (c *arrival) confirmOnce(ctx context.Context, p brokerlink.Delivery, since time.Time) error {
	if err := c.prepare(ctx, p); err != nil {
		return err
	}
	if empty(&p) {
		return nil
	}
	addA, addP, err := c.admit(p.ENIID, p.Addrs, p.Prefixes, since)
	if err != nil {
		return err
	}
	c.checkLater(ctx, p.ENIID, p.MAC, addA, addP)
	return nil
}

// admit moves delivered addresses from awaited into the pool and returns
// those it added. The record may have changed since p was taken: only
// what is still awaited is added, and nothing the pool holds on another
// ENI.
func (c *arrival) admit(eniID string, seenA []netip.Addr, seenP []netip.Prefix, since time.Time) ([]netip.Addr, []netip.Prefix, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.pending[eniID]
	if cur == nil {
		return nil, nil, nil
	}
	onOther := map[netip.Addr]bool{}
	for _, v := range c.pool.View() {
		for _, a := range v.Addrs {
			onOther[a.Addr] = v.ID != eniID
		}
	}
	addA := slices.DeleteFunc(slices.Clone(seenA), func(a netip.Addr) bool { return !slices.Contains(cur.Addrs, a) || onOther[a] })
	addP := slices.DeleteFunc(slices.Clone(seenP), func(x netip.Prefix) bool {
		return !slices.Contains(cur.Prefixes, x) || onOther[x.Addr()]
	})
	if len(addA)+len(addP) > 0 {
		delivered := c.delivering()
		n, err := c.pool.AddCapacity(eniID, addA, addP)
		if err != nil {
			return nil, nil, fmt.Errorf("add delivered capacity: %w", err)
		}
		c.log.Info("delivered addresses added", "eni", eniID, "added", n)
		delivered(eniID, n, since)
	}
	cur.Addrs = slices.DeleteFunc(cur.Addrs, func(a netip.Addr) bool { return slices.Contains(seenA, a) })
	cur.Prefixes = slices.DeleteFunc(cur.Prefixes, func(x netip.Prefix) bool { return slices.Contains(seenP, x) })
	// The demand counted these as on their way; now the pool has them (or
	// another ENI does).
	c.changed()
	return addA, addP, nil
}

// prepare sets up an ENI new to this process: IMDS must show it (it lags an
// attach too) under the ID the broker gives; then the host side is set up
// and the ENI recorded in the pool, before any of its addresses can be.
func (c *arrival) prepare(ctx context.Context, e brokerlink.Delivery) error {
	c.mu.Lock()
	done := c.ready[e.ENIID]
	c.mu.Unlock()
	if done {
		return nil
	}
	meta, err := identity.ENI(ctx, c.imds, e.MAC)
	if errors.Is(err, identity.ErrNotFound) {
		return fmt.Errorf("imds doesn't show eni %s (%s) yet", e.ENIID, e.MAC)
	}
	if err != nil {
		return err
	}
	if meta.ENIID != e.ENIID {
		return fmt.Errorf("imds shows MAC %s as %s, the broker says %s", e.MAC, meta.ENIID, e.ENIID)
	}
	primaryIP, _ := meta.PrimaryIPv4()
	err = c.net.SetupENI(hostnet.ENIConfig{
		MAC: meta.MAC, DeviceIndex: meta.DeviceNumber, PrimaryIP: primaryIP, Subnet: meta.SubnetCIDR, MTU: c.mtu,
	})
	if err != nil {
		return fmt.Errorf("set up eni %s: %w", e.ENIID, err)
	}
	err = c.pool.AddENI(pool.ENI{
		ID: e.ENIID, MAC: meta.MAC, DeviceIndex: meta.DeviceNumber, Primary: meta.DeviceNumber == 0,
		SubnetID: meta.SubnetID, SubnetCIDR: meta.SubnetCIDR, PrimaryIP: primaryIP,
	})
	if err != nil {
		return fmt.Errorf("record eni %s: %w", e.ENIID, err)
	}
	c.mu.Lock()
	c.ready[e.ENIID] = true
	c.mu.Unlock()
	c.log.Info("ENI set up", "eni", e.ENIID, "mac", meta.MAC, "device_index", meta.DeviceNumber)
	c.onReady(e.ENIID)
	return nil
}
