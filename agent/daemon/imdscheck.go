package daemon

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"github.com/allotnet/allot/agent/identity"
)

// DefaultIMDSCheckAfter is how long after delivered addresses joined the
// pool the agent asks IMDS whether it shows them. IMDS lags EC2 by about a
// second; ten leave it room, and one request per delivery costs nothing
// on a pod's path.
const DefaultIMDSCheckAfter = 10 * time.Second

// checkLater asks IMDS, after checkAfter and once more after as long
// again, whether it shows addresses that joined the pool from the broker's
// record. What it still doesn't show, and the pool still holds on the ENI
// (the broker may have taken some back meanwhile), is logged and counted
// as a disagreement between EC2's answer and what the instance sees. It
// changes nothing: the broker's record came from EC2, which decides.
func (c *arrival) checkLater(ctx context.Context, eniID, mac string, addrs []netip.Addr, prefixes []netip.Prefix) {
	if c.checkAfter < 0 || len(addrs)+len(prefixes) == 0 {
		return
	}
	c.wg.Go(func() {
		for try := 0; try < 2; try++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(c.checkAfter):
			}
			ma, mp, err := identity.Unconfirmed(ctx, c.imds, mac, addrs, prefixes)
			if err != nil {
				c.log.Debug("imds check of delivered addresses failed", "eni", eniID, "err", err)
				continue
			}
			addrs, prefixes = c.stillHeld(eniID, ma, mp)
			if len(addrs)+len(prefixes) == 0 {
				return
			}
		}
		c.disagreed.Add(int64(len(addrs) + len(prefixes)))
		c.log.Warn("imds doesn't show addresses EC2 assigned and the pool holds",
			"eni", eniID, "addresses", addrs, "prefixes", prefixes, "after", 2*c.checkAfter)
	})
}

// stillHeld returns those of addrs and prefixes the pool still holds on
// the ENI.
func (c *arrival) stillHeld(eniID string, addrs []netip.Addr, prefixes []netip.Prefix) ([]netip.Addr, []netip.Prefix) {
	held := map[netip.Addr]bool{}
	heldPfx := map[netip.Prefix]bool{}
	for _, v := range c.pool.View() {
		if v.ID != eniID {
			continue
		}
		for _, a := range v.Addrs {
			if a.Prefix.IsValid() {
				heldPfx[a.Prefix] = true
			} else {
				held[a.Addr] = true
			}
		}
	}
	addrs = slices.DeleteFunc(slices.Clone(addrs), func(a netip.Addr) bool { return !held[a] })
	prefixes = slices.DeleteFunc(slices.Clone(prefixes), func(p netip.Prefix) bool { return !heldPfx[p.Masked()] })
	return addrs, prefixes
}

// IMDSDisagreements counts delivered addresses IMDS still didn't show
// twice IMDSCheckAfter after they joined the pool.
func (a *Agent) IMDSDisagreements() int64 { return a.arrival.disagreed.Load() }
