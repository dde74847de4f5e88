package hostnet

import (
	"fmt"
	"net/netip"
	"slices"
)

// TeardownPod removes what SetupPod added for this attachment: deleting the
// host veth takes its peer, the pod's routes and the host /32 route with it;
// then the rules of the addresses it routed, and of c.Address, go. The
// address may be omitted: the veth's routes name it. It never opens the pod namespace, so a
// namespace that is already gone changes nothing, and a second call finds
// nothing left to do.
//
// Rules are keyed by address, not by attachment. If the address is by now
// routed to another interface it has been handed to another pod, and the
// rules are that pod's: they are left alone. This is what keeps a late DEL of
// an old sandbox from cutting off a newer one.
func (l *Linux) TeardownPod(c PodConfig) error {
	if err := c.ValidateForTeardown(); err != nil {
		return err
	}
	hostName := HostVethName(c.Attachment)
	fail := func(step string, err error) error {
		return fmt.Errorf("teardown pod %v: %s: %w", c.Attachment, step, err)
	}
	// Addresses routed through the veth are certainly this pod's; reading
	// them first lets a DEL that lost the address still clean up.
	var routed []netip.Addr
	host, err := l.nl.LinkByName(hostName)
	switch {
	case err == nil:
		routes, err := l.mainHostRoutes()
		if err != nil {
			return fail("list routes", err)
		}
		for _, r := range routes {
			if a, ok := host32Addr(r.Dst); ok && r.LinkIndex == host.Attrs().Index {
				routed = append(routed, a)
			}
		}
		if err := l.nl.LinkDel(host); err != nil && !isNotFound(err) {
			return fail("delete "+hostName, err)
		}
	case !isNotFound(err):
		return fail("look up "+hostName, err)
	}
	for _, a := range routed {
		if err := l.deletePodRules(a, 0); err != nil {
			return fail("rules", err)
		}
	}
	if !c.Address.IsValid() || slices.Contains(routed, c.Address) {
		return nil
	}
	owner, err := l.routeOwner(c.Address)
	if err != nil {
		return fail("check address", err)
	}
	if owner != "" {
		l.log.Info("pod address now belongs to another interface; keeping its rules",
			"attachment", c.Attachment.String(), "address", c.Address.String(), "owner", owner)
		return nil
	}
	if err := l.deletePodRules(c.Address, 0); err != nil {
		return fail("rules", err)
	}
	l.log.Debug("pod unwired", "attachment", c.Attachment.String(), "host_veth", hostName,
		"address", c.Address.String())
	return nil
}
