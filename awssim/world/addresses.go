package world

import (
	"net/netip"
	"slices"
	"time"
)

// allocateLocked gives e the explicit addresses, count more addresses, the
// explicit prefixes and prefixCount more /28 prefixes from its subnet — all
// or nothing. It returns what it added.
func (w *World) allocateLocked(e *eni, explicit []string, count int, prefixes []string, prefixCount int) (ips []netip.Addr, pfxs []netip.Prefix, err error) {
	pool := e.subnet.pool
	defer func() {
		if err != nil {
			for _, a := range ips {
				pool.release(a)
			}
			for _, p := range pfxs {
				pool.releasePrefix(p)
			}
			ips, pfxs = nil, nil
		}
	}()
	seen := map[netip.Addr]bool{}
	for _, s := range explicit {
		a, perr := netip.ParseAddr(s)
		if perr != nil || !a.Is4() {
			return ips, pfxs, errorf(CodeInvalidParameterValue, "Invalid IPv4 address %q", shorten(s))
		}
		if seen[a] {
			return ips, pfxs, errorf(CodeInvalidParameterValue, "Address %s is given more than once", a)
		}
		seen[a] = true
		if cerr := pool.claim(a); cerr != nil {
			return ips, pfxs, cerr
		}
		ips = append(ips, a)
	}
	if count > pool.free {
		return ips, pfxs, errorf(CodeInsufficientAddresses, "The specified subnet %s does not have enough free addresses to satisfy the request.", e.subnet.id)
	}
	for range count {
		a, ok := pool.take()
		if !ok {
			return ips, pfxs, errorf(CodeInsufficientAddresses, "The specified subnet %s does not have enough free addresses to satisfy the request.", e.subnet.id)
		}
		ips = append(ips, a)
	}
	for _, s := range prefixes {
		p, perr := netip.ParsePrefix(s)
		if perr != nil {
			return ips, pfxs, errorf(CodeInvalidParameterValue, "Invalid IPv4 prefix %q", shorten(s))
		}
		if cerr := pool.claimPrefix(p); cerr != nil {
			return ips, pfxs, cerr
		}
		pfxs = append(pfxs, p)
	}
	for range prefixCount {
		p, ok := pool.takePrefix()
		if !ok {
			return ips, pfxs, errorf(CodeInsufficientCidrBlocks, "The specified subnet does not have enough free cidr blocks to satisfy the request.")
		}
		pfxs = append(pfxs, p)
	}
	e.ips = append(e.ips, ips...)
	e.prefixes = append(e.prefixes, pfxs...)
	e.touch()
	return ips, pfxs, nil
}

// AssignInput is AssignPrivateIpAddresses's request: a count or a list of
// addresses, or a count or a list of /28 prefixes.
type AssignInput struct {
	ENIID             string
	Addresses         []string
	Count             int
	Prefixes          []string
	PrefixCount       int
	AllowReassignment bool
}

// AssignResult is what AssignPrivateIpAddresses assigned.
type AssignResult struct {
	Addresses []string
	Prefixes  []string
}

// AssignPrivateIPAddresses adds secondary addresses or prefixes to an ENI,
// bounded by its instance type's per-ENI limit when attached.
func (w *World) AssignPrivateIPAddresses(in AssignInput) (AssignResult, error) {
	var out AssignResult
	err := w.do(func(time.Time) error {
		e, err := w.eniLocked(in.ENIID)
		if err != nil {
			return err
		}
		secondaries := in.Count > 0 || len(in.Addresses) > 0
		prefixes := in.PrefixCount > 0 || len(in.Prefixes) > 0
		switch {
		case in.Count < 0 || in.PrefixCount < 0:
			return errorf(CodeInvalidParameterValue, "Address and prefix counts must not be negative")
		case !secondaries && !prefixes:
			return errorf(CodeMissingParameter, "Either SecondaryPrivateIpAddressCount, PrivateIpAddress, Ipv4PrefixCount or Ipv4Prefix must be specified")
		case in.Count > 0 && len(in.Addresses) > 0:
			return errorf(CodeInvalidParameterCombo, "You can't specify a count of private IPv4 addresses together with specific private IPv4 addresses")
		case in.PrefixCount > 0 && len(in.Prefixes) > 0:
			return errorf(CodeInvalidParameterCombo, "You can't specify a count of IPv4 prefixes together with specific IPv4 prefixes")
		case secondaries && prefixes:
			return errorf(CodeInvalidParameterCombo, "You can't assign private IPv4 addresses and IPv4 prefixes in the same request")
		}
		limit, nitro := maxSlotsAnyType, true
		if e.att != nil {
			t := w.types[w.instances[e.att.InstanceID].typ]
			limit, nitro = t.IPv4PerENI, t.Nitro
		}
		if prefixes && !nitro {
			return errorf(CodeInvalidParameterValue, "IPv4 prefixes are not supported for the instance type of %s (Nitro only)", e.id)
		}
		added := in.Count + len(in.Addresses) + in.PrefixCount + len(in.Prefixes)
		if e.slots()+added > limit {
			return errorf(CodeAddressLimit, "Number of private addresses will exceed limit of %d for %s.", limit, e.id)
		}
		moved := w.reassignLocked(e, in)
		ips, pfxs, err := w.allocateLocked(e, in.Addresses, in.Count, in.Prefixes, in.PrefixCount)
		if err != nil {
			w.restoreLocked(moved)
			return err
		}
		for _, a := range ips {
			out.Addresses = append(out.Addresses, a.String())
		}
		for _, p := range pfxs {
			out.Prefixes = append(out.Prefixes, p.String())
		}
		w.addressesChangedLocked(e)
		for _, m := range moved {
			w.addressesChangedLocked(m.from)
		}
		return nil
	})
	return out, err
}

type movedAddr struct {
	from *eni
	addr netip.Addr
}

// reassignLocked takes explicitly requested addresses away from the other
// ENIs of the subnet that hold them as secondaries, when the caller allows it.
func (w *World) reassignLocked(to *eni, in AssignInput) []movedAddr {
	if !in.AllowReassignment {
		return nil
	}
	var moved []movedAddr
	for _, s := range in.Addresses {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		for _, o := range w.enis {
			if o == to || o.subnet != to.subnet {
				continue
			}
			if i := slices.Index(o.ips, a); i > 0 {
				o.ips = slices.Delete(o.ips, i, i+1)
				o.touch()
				o.subnet.pool.release(a)
				moved = append(moved, movedAddr{o, a})
			}
		}
	}
	return moved
}

func (w *World) restoreLocked(moved []movedAddr) {
	for _, m := range moved {
		_ = m.from.subnet.pool.claim(m.addr)
		m.from.ips = append(m.from.ips, m.addr)
		m.from.touch()
	}
}

// UnassignInput is UnassignPrivateIpAddresses's request.
type UnassignInput struct {
	ENIID     string
	Addresses []string
	Prefixes  []string
}

// UnassignPrivateIPAddresses removes secondary addresses or prefixes from an
// ENI and returns them to the subnet. The primary address cannot be removed.
func (w *World) UnassignPrivateIPAddresses(in UnassignInput) error {
	return w.do(func(time.Time) error {
		e, err := w.eniLocked(in.ENIID)
		if err != nil {
			return err
		}
		if len(in.Addresses) == 0 && len(in.Prefixes) == 0 {
			return errorf(CodeMissingParameter, "Either PrivateIpAddress or Ipv4Prefix must be specified")
		}
		var idx []int
		for _, s := range in.Addresses {
			a, perr := netip.ParseAddr(s)
			i := -1
			if perr == nil {
				i = slices.Index(e.ips, a)
			}
			if i == 0 {
				return errorf(CodeInvalidParameterValue, "The primary private IPv4 address %s of %s cannot be unassigned", a, e.id)
			}
			if i < 0 || slices.Contains(idx, i) {
				return errorf(CodeInvalidParameterValue, "Some of the specified addresses are not assigned to interface %s", e.id)
			}
			idx = append(idx, i)
		}
		var pidx []int
		for _, s := range in.Prefixes {
			p, perr := netip.ParsePrefix(s)
			i := -1
			if perr == nil {
				i = slices.Index(e.prefixes, p)
			}
			if i < 0 || slices.Contains(pidx, i) {
				return errorf(CodeInvalidParameterValue, "Some of the specified prefixes are not assigned to interface %s", e.id)
			}
			pidx = append(pidx, i)
		}
		for _, i := range idx {
			e.subnet.pool.release(e.ips[i])
		}
		for _, i := range pidx {
			e.subnet.pool.releasePrefix(e.prefixes[i])
		}
		e.ips = deleteIndexes(e.ips, idx)
		e.prefixes = deleteIndexes(e.prefixes, pidx)
		e.touch()
		w.addressesChangedLocked(e)
		return nil
	})
}

func deleteIndexes[T any](s []T, idx []int) []T {
	if len(idx) == 0 {
		return s
	}
	out := s[:0:0]
	for i, v := range s {
		if !slices.Contains(idx, i) {
			out = append(out, v)
		}
	}
	return out
}

// addressesChangedLocked fires the hook and refreshes IMDS for e's instance.
func (w *World) addressesChangedLocked(e *eni) {
	if e.att != nil {
		w.dirty[e.att.InstanceID] = true
	}
	w.emitLocked(hookAddresses, "", e)
}
