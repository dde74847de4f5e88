package identity

import (
	"context"
	"fmt"
	"net/netip"
	"time"
)

// Missing returns the addresses and prefixes that e doesn't show yet. An
// address inside one of e's prefixes counts as shown, since a pool hands out
// prefix addresses one by one.
func (e ENIMeta) Missing(addrs []netip.Addr, prefixes []netip.Prefix) ([]netip.Addr, []netip.Prefix) {
	return missing(e.IPv4s, e.Prefixes, addrs, prefixes)
}

func missing(haveIPs []netip.Addr, havePfx []netip.Prefix, addrs []netip.Addr, prefixes []netip.Prefix) ([]netip.Addr, []netip.Prefix) {
	ips := map[netip.Addr]bool{}
	for _, a := range haveIPs {
		ips[a] = true
	}
	pfx := map[netip.Prefix]bool{}
	for _, p := range havePfx {
		pfx[p.Masked()] = true
	}
	var ma []netip.Addr
	for _, a := range addrs {
		if ips[a] {
			continue
		}
		in := false
		for _, p := range havePfx {
			if p.Contains(a) {
				in = true
				break
			}
		}
		if !in {
			ma = append(ma, a)
		}
	}
	var mp []netip.Prefix
	for _, p := range prefixes {
		if !pfx[p.Masked()] {
			mp = append(mp, p)
		}
	}
	return ma, mp
}

// Unconfirmed asks IMDS which of addrs and prefixes are not yet visible on
// the ENI with mac. IMDS lags EC2 after an assign or attach, so an agent
// checks addresses the broker delivered before handing them out. It reads
// only the two lists it needs, so it is cheap enough to poll. An ENI that
// IMDS doesn't show yet reports everything as unconfirmed, without error.
func Unconfirmed(ctx context.Context, c MetadataAPI, mac string, addrs []netip.Addr, prefixes []netip.Prefix) ([]netip.Addr, []netip.Prefix, error) {
	p := macPath(mac)
	// Reading local-ipv4s of an unlisted MAC answers 404, which getList
	// treats as an empty list: exactly "nothing visible yet".
	have, err := getAddrs(ctx, c, p+"local-ipv4s")
	if err != nil {
		return nil, nil, fmt.Errorf("eni %s: %w", mac, err)
	}
	havePfx, err := getPrefixes(ctx, c, p+"ipv4-prefix")
	if err != nil {
		return nil, nil, fmt.Errorf("eni %s: %w", mac, err)
	}
	ma, mp := missing(have, havePfx, addrs, prefixes)
	return ma, mp, nil
}

// WaitVisible polls IMDS every interval until all of addrs and prefixes are
// visible on the ENI with mac, or ctx ends (its error is returned, wrapped,
// with what was still missing).
func WaitVisible(ctx context.Context, c MetadataAPI, mac string, addrs []netip.Addr, prefixes []netip.Prefix, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ma, mp, err := Unconfirmed(ctx, c, mac, addrs, prefixes)
		if err == nil && len(ma) == 0 && len(mp) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("waiting for eni %s addresses in imds: %w (last error: %v)", mac, ctx.Err(), err)
			}
			return fmt.Errorf("waiting for eni %s addresses in imds: %w (still missing %v %v)", mac, ctx.Err(), ma, mp)
		case <-t.C:
		}
	}
}
