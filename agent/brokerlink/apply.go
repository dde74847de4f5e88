package brokerlink

import (
	"errors"
	"net/netip"
	"strings"

	"github.com/allotnet/allot/agent/pool"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// brokerENI is one ENI of the broker's record, parsed.
type brokerENI struct {
	id          string
	mac         string
	deviceIndex int
	addrs       []netip.Addr
	prefixes    []netip.Prefix
}

func parseENI(e *allotv1.ENI) (brokerENI, []string) {
	b := brokerENI{id: e.GetEniId(), mac: strings.ToLower(e.GetMac()), deviceIndex: int(e.GetDeviceIndex())}
	var bad []string
	for _, s := range e.GetAddresses() {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			bad = append(bad, s)
			continue
		}
		b.addrs = append(b.addrs, a)
	}
	for _, s := range e.GetPrefixes() {
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is4() || p.Bits() != 28 {
			bad = append(bad, s)
			continue
		}
		b.prefixes = append(b.prefixes, p.Masked())
	}
	return b, bad
}

// applyLocked brings the pool in line with the broker's record of the
// node's ENIs at revision rev; applyMu is held. It returns false, doing
// nothing, for a record older than one already applied.
//
// Addresses the broker lists and the pool lacks go to the confirmer, which
// adds them once IMDS shows them. Addresses the pool has and the broker no
// longer lists leave the pool only if no pod holds them (pool.Retain); one
// a pod still holds is drift, logged and kept.
//
// The snapshot's address slots (secondary addresses, plus 16 per /28
// prefix, over the ENIs taken from it) become Known, the figure the next
// demand is stated against: exactly what the pool holds or the confirmer
// awaits from this snapshot, set under seenMu with them.
func (l *Link) applyLocked(enis []*allotv1.ENI, rev int64) bool {
	if rev != 0 && rev < l.lastRev {
		l.log.Debug("stale broker snapshot ignored", "revision", rev, "applied", l.lastRev)
		return false
	}
	l.lastRev = rev
	l.seenMu.Lock()
	defer l.seenMu.Unlock()

	have := map[netip.Addr]string{} // pool address -> its ENI
	for _, v := range l.pool.View() {
		for _, a := range v.Addrs {
			have[a.Addr] = v.ID
		}
	}
	listed := map[string]brokerENI{}
	listedAddrs := map[netip.Addr]bool{}
	var listedPfx []netip.Prefix
	known := 0
	for _, e := range enis {
		b, bad := parseENI(e)
		if len(bad) > 0 {
			l.log.Warn("broker lists malformed addresses; ignored", "eni", b.id, "values", bad)
		}
		if b.id == "" || b.mac == "" {
			l.log.Warn("broker lists an ENI without id or MAC; ignored", "eni", b.id)
			continue
		}
		listed[b.id] = b
		// What the demand accounts for: the pool or the confirmer holds
		// every well-formed entry of an ENI taken from the snapshot.
		known += allotv1.PodAddresses(len(b.addrs), len(b.prefixes))
		for _, a := range b.addrs {
			listedAddrs[a] = true
		}
		listedPfx = append(listedPfx, b.prefixes...)

		var missA []netip.Addr
		var missP []netip.Prefix
		for _, a := range b.addrs {
			if _, ok := have[a]; !ok {
				missA = append(missA, a)
			}
		}
		for _, p := range b.prefixes {
			if _, ok := have[p.Addr()]; !ok {
				missP = append(missP, p)
			}
		}
		l.confirm.want(b, missA, missP)
	}

	for _, e := range l.pool.ENIs() {
		b, ok := listed[e.ID]
		dropped, drift, err := l.pool.Retain(e.ID, b.addrs, b.prefixes)
		if err != nil {
			l.log.Error("cannot drop addresses the broker no longer lists", "eni", e.ID, "err", err)
			continue
		}
		if len(dropped) > 0 {
			l.log.Info("addresses no longer listed by the broker left the pool", "eni", e.ID, "count", len(dropped))
		}
		if len(drift) > 0 {
			l.log.Warn("broker no longer lists addresses pods still hold; kept", "eni", e.ID, "addresses", drift)
		}
		if ok || e.Primary {
			continue
		}
		l.confirm.drop(e.ID)
		switch err := l.pool.RemoveENI(e.ID); {
		case errors.Is(err, pool.ErrInUse):
			l.log.Warn("broker no longer lists an ENI pods still use; kept", "eni", e.ID, "err", err)
		case err != nil:
			l.log.Error("cannot remove ENI the broker no longer lists", "eni", e.ID, "err", err)
		default:
			l.log.Info("ENI no longer listed by the broker left the pool", "eni", e.ID)
		}
	}

	l.mu.Lock()
	l.listed, l.listedPfx = listedAddrs, listedPfx
	l.status.Revision, l.status.Known = rev, known
	l.mu.Unlock()
	poke(l.recalc)
	return true
}

// isListed reports whether the broker's last record puts a on one of the
// node's ENIs; usage reports name only such addresses, since the broker
// refuses a report naming any other.
func (l *Link) isListed(a netip.Addr) bool {
	if l.listed[a] {
		return true
	}
	for _, p := range l.listedPfx {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
