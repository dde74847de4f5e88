package hostnet

import (
	"net/netip"
	"strings"
	"testing"
)

func TestHostVethName(t *testing.T) {
	base := Attachment{Network: "allot", ContainerID: "0123abcd", IfName: "eth0"}
	name := HostVethName(base)
	if len(name) != 14 || !strings.HasPrefix(name, VethPrefix) {
		t.Fatalf("HostVethName = %q, want %q + 11 hex digits", name, VethPrefix)
	}
	if HostVethName(base) != name {
		t.Errorf("HostVethName is not deterministic")
	}
	// Any part of the attachment changes the name; a pod recreated under
	// the same name gets a new sandbox (container ID) and so a new veth.
	for _, other := range []Attachment{
		{Network: "other", ContainerID: base.ContainerID, IfName: base.IfName},
		{Network: base.Network, ContainerID: "0123abce", IfName: base.IfName},
		{Network: base.Network, ContainerID: base.ContainerID, IfName: "eth1"},
		// Field boundaries matter: "ab"+"c" is not "a"+"bc".
		{Network: "allot0", ContainerID: "123abcd", IfName: base.IfName},
	} {
		if HostVethName(other) == name {
			t.Errorf("HostVethName(%v) = HostVethName(%v) = %s", other, base, name)
		}
	}
}

func TestRouteTableAndGateway(t *testing.T) {
	for idx, want := range map[int]int{0: 254, 1: 2, 2: 3, 14: 15} {
		if got := RouteTable(idx); got != want {
			t.Errorf("RouteTable(%d) = %d, want %d", idx, got, want)
		}
	}
	for cidr, want := range map[string]string{
		"10.0.1.0/24":    "10.0.1.1",
		"10.0.1.77/24":   "10.0.1.1",
		"172.31.32.0/20": "172.31.32.1",
	} {
		if got := SubnetGateway(netip.MustParsePrefix(cidr)); got.String() != want {
			t.Errorf("SubnetGateway(%s) = %s, want %s", cidr, got, want)
		}
	}
}

func TestAliasRoundTrip(t *testing.T) {
	a := Attachment{Network: "allot-net", ContainerID: "f00d.1_2-3", IfName: "eth0"}
	got, ok := parseAlias(a.alias())
	if !ok || got != a {
		t.Errorf("parseAlias(%q) = %v, %v", a.alias(), got, ok)
	}
	for _, s := range []string{"", "eth0", "allot/a/b", "allot/a/b/c/d", "other/a/b/c", "allot/a b/c/eth0"} {
		if _, ok := parseAlias(s); ok {
			t.Errorf("parseAlias(%q) accepted a foreign alias", s)
		}
	}
}
