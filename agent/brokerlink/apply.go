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

// snapshotDiff is what bringing the pool in line with one broker snapshot
// takes; diffSnapshot computes it without touching anything.
type snapshotDiff struct {
	// await is, for every well-formed ENI of the snapshot, what the pool
	// lacks of it (possibly nothing).
	await []Delivery
	// keep is, per ENI the pool holds, what the snapshot lists on it: the
	// pool keeps those and the addresses pods hold, and drops the rest.
	keep map[string]brokerENI
	// remove are ENIs the pool holds that the snapshot does not list
	// (never the primary).
	remove []string
	// listed and listedPfx are every address and prefix the snapshot
	// puts on the node; known counts them (allotv1.PodAddresses).
	listed    map[netip.Addr]bool
	listedPfx []netip.Prefix
	known     int
	// malformed are values ignored, by ENI; nameless are ENIs ignored for
	// want of an ID or MAC.
	malformed map[string][]string
	nameless  []string
}

// diffSnapshot compares the broker's record of the node's ENIs with the
// pool's view of itself.
func diffSnapshot(enis []*allotv1.ENI, view []pool.ENIView) snapshotDiff {
	d := snapshotDiff{keep: map[string]brokerENI{}, listed: map[netip.Addr]bool{}, malformed: map[string][]string{}}
	have := map[netip.Addr]bool{}
	for _, v := range view {
		for _, a := range v.Addrs {
			have[a.Addr] = true
		}
	}
	listed := map[string]brokerENI{}
	for _, e := range enis {
		b, bad := parseENI(e)
		if len(bad) > 0 {
			d.malformed[b.id] = bad
		}
		if b.id == "" || b.mac == "" {
			d.nameless = append(d.nameless, b.id)
			continue
		}
		listed[b.id] = b
		d.known += allotv1.PodAddresses(len(b.addrs), len(b.prefixes))
		for _, a := range b.addrs {
			d.listed[a] = true
		}
		d.listedPfx = append(d.listedPfx, b.prefixes...)
		dl := Delivery{ENIID: b.id, MAC: b.mac, DeviceIndex: b.deviceIndex}
		for _, a := range b.addrs {
			if !have[a] {
				dl.Addrs = append(dl.Addrs, a)
			}
		}
		for _, p := range b.prefixes {
			if !have[p.Addr()] {
				dl.Prefixes = append(dl.Prefixes, p)
			}
		}
		d.await = append(d.await, dl)
	}
	for _, v := range view {
		b, ok := listed[v.ID]
		d.keep[v.ID] = b
		if !ok && !v.Primary {
			d.remove = append(d.remove, v.ID)
		}
	}
	return d
}

// applyLocked brings the pool in line with the broker's record of the
// node's ENIs at revision rev; applyMu is held. It returns false, doing
// nothing, for a record older than one already applied.
//
// Addresses the broker lists and the pool lacks go to Arrivals, which adds
// them once the node sees them. Addresses the pool has and the broker no
// longer lists leave the pool only if no pod holds them (pool.Retain); one
// a pod still holds is drift, logged and kept.
//
// The snapshot's addresses (allotv1.PodAddresses over the ENIs taken from
// it) become Known, the figure the next demand is stated against: exactly
// what the pool holds or Arrivals awaits from this snapshot, set under
// seenMu with them.
func (l *Link) applyLocked(enis []*allotv1.ENI, rev int64) bool {
	if rev != 0 && rev < l.lastRev {
		l.log.Debug("stale broker snapshot ignored", "revision", rev, "applied", l.lastRev)
		return false
	}
	l.lastRev = rev
	l.seenMu.Lock()
	defer l.seenMu.Unlock()
	d := diffSnapshot(enis, l.pool.View())
	for id, bad := range d.malformed {
		l.log.Warn("broker lists malformed addresses; ignored", "eni", id, "values", bad)
	}
	for _, id := range d.nameless {
		l.log.Warn("broker lists an ENI without id or MAC; ignored", "eni", id)
	}
	// Await first: from here on nothing the snapshot no longer lists can
	// arrive, so what Retain drops stays dropped.
	for _, dl := range d.await {
		l.arrivals.Await(dl)
	}
	l.retain(d)
	l.mu.Lock()
	l.listed, l.listedPfx = d.listed, d.listedPfx
	l.status.Revision, l.status.Known = rev, d.known
	l.mu.Unlock()
	poke(l.recalc)
	return true
}

// retain drops from the pool what the snapshot no longer lists and no pod
// holds, and the ENIs it no longer lists once no pod uses them.
func (l *Link) retain(d snapshotDiff) {
	for id, b := range d.keep {
		dropped, drift, err := l.pool.Retain(id, b.addrs, b.prefixes)
		if err != nil {
			l.log.Error("cannot drop addresses the broker no longer lists", "eni", id, "err", err)
			continue
		}
		if len(dropped) > 0 {
			l.log.Info("addresses no longer listed by the broker left the pool", "eni", id, "count", len(dropped))
		}
		if len(drift) > 0 {
			l.log.Warn("broker no longer lists addresses pods still hold; kept", "eni", id, "addresses", drift)
		}
	}
	for _, id := range d.remove {
		l.arrivals.Forget(id)
		switch err := l.pool.RemoveENI(id); {
		case errors.Is(err, pool.ErrInUse):
			l.log.Warn("broker no longer lists an ENI pods still use; kept", "eni", id, "err", err)
		case err != nil:
			l.log.Error("cannot remove ENI the broker no longer lists", "eni", id, "err", err)
		default:
			l.log.Info("ENI no longer listed by the broker left the pool", "eni", id)
		}
	}
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
