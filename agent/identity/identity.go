package identity

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Identity is what a node knows about itself from IMDS.
type Identity struct {
	InstanceID       string
	InstanceType     string
	AvailabilityZone string
	PrimaryMAC       string
	PrimaryIPv4      netip.Addr
	// ENIs are the attached interfaces, ordered by device number.
	ENIs []ENIMeta
}

// Primary returns the ENI holding the instance's primary MAC.
func (id Identity) Primary() (ENIMeta, bool) {
	for _, e := range id.ENIs {
		if e.MAC == id.PrimaryMAC {
			return e, true
		}
	}
	return ENIMeta{}, false
}

// ENIMeta is one attached ENI as IMDS shows it.
type ENIMeta struct {
	MAC              string
	ENIID            string
	DeviceNumber     int
	SubnetID         string
	SubnetCIDR       netip.Prefix
	VPCID            string
	VPCCIDRs         []netip.Prefix
	SecurityGroupIDs []string
	// IPv4s are the ENI's private addresses, primary first.
	IPv4s    []netip.Addr
	Prefixes []netip.Prefix
}

// PrimaryIPv4 is the ENI's own address, which is never given to a pod.
func (e ENIMeta) PrimaryIPv4() (netip.Addr, bool) {
	if len(e.IPv4s) == 0 {
		return netip.Addr{}, false
	}
	return e.IPv4s[0], true
}

// Fetch reads the node's identity and all its ENIs.
func Fetch(ctx context.Context, c MetadataAPI) (Identity, error) {
	var id Identity
	var err error
	for _, f := range []struct {
		path string
		dst  *string
	}{
		{"instance-id", &id.InstanceID},
		{"instance-type", &id.InstanceType},
		{"placement/availability-zone", &id.AvailabilityZone},
		{"mac", &id.PrimaryMAC},
	} {
		if *f.dst, err = getString(ctx, c, f.path); err != nil {
			return Identity{}, fmt.Errorf("node identity: %w", err)
		}
	}
	ip, err := getString(ctx, c, "local-ipv4")
	if err != nil {
		return Identity{}, fmt.Errorf("node identity: %w", err)
	}
	if id.PrimaryIPv4, err = netip.ParseAddr(ip); err != nil {
		return Identity{}, fmt.Errorf("node identity: local-ipv4: %w", err)
	}
	if id.ENIs, err = ENIs(ctx, c); err != nil {
		return Identity{}, fmt.Errorf("node identity: %w", err)
	}
	if _, ok := id.Primary(); !ok {
		return Identity{}, fmt.Errorf("node identity: primary mac %s is not among the interfaces", id.PrimaryMAC)
	}
	return id, nil
}

// ENIs reads every attached ENI, ordered by device number. A MAC that IMDS
// lists but whose details are missing (an attach or detach in flight) is an
// error: the caller should retry rather than act on half a picture.
func ENIs(ctx context.Context, c MetadataAPI) ([]ENIMeta, error) {
	macs, err := getList(ctx, c, "network/interfaces/macs/")
	if err != nil {
		return nil, err
	}
	out := make([]ENIMeta, 0, len(macs))
	for _, m := range macs {
		e, err := ENI(ctx, c, strings.TrimSuffix(m, "/"))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b ENIMeta) int { return a.DeviceNumber - b.DeviceNumber })
	return out, nil
}

// ENI reads one ENI by MAC. It returns an error wrapping ErrNotFound when
// IMDS doesn't (yet) show that MAC.
func ENI(ctx context.Context, c MetadataAPI, mac string) (ENIMeta, error) {
	p := macPath(mac)
	e := ENIMeta{MAC: mac}
	var err error
	wrap := func(err error) (ENIMeta, error) { return ENIMeta{}, fmt.Errorf("eni %s: %w", mac, err) }

	if e.ENIID, err = getString(ctx, c, p+"interface-id"); err != nil {
		return wrap(err)
	}
	if e.DeviceNumber, err = getInt(ctx, c, p+"device-number"); err != nil {
		return wrap(err)
	}
	if e.SubnetID, err = getString(ctx, c, p+"subnet-id"); err != nil {
		return wrap(err)
	}
	cidr, err := getString(ctx, c, p+"subnet-ipv4-cidr-block")
	if err != nil {
		return wrap(err)
	}
	if e.SubnetCIDR, err = netip.ParsePrefix(cidr); err != nil {
		return wrap(fmt.Errorf("subnet-ipv4-cidr-block: %w", err))
	}
	if e.VPCID, err = getString(ctx, c, p+"vpc-id"); err != nil {
		return wrap(err)
	}
	if e.VPCCIDRs, err = getPrefixes(ctx, c, p+"vpc-ipv4-cidr-blocks"); err != nil {
		return wrap(err)
	}
	if e.SecurityGroupIDs, err = getList(ctx, c, p+"security-group-ids"); err != nil {
		return wrap(err)
	}
	if e.IPv4s, err = getAddrs(ctx, c, p+"local-ipv4s"); err != nil {
		return wrap(err)
	}
	if e.Prefixes, err = getPrefixes(ctx, c, p+"ipv4-prefix"); err != nil {
		return wrap(err)
	}
	return e, nil
}

func macPath(mac string) string { return "network/interfaces/macs/" + mac + "/" }
