package cnispec

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// The result types of the spec versions the plugin speaks, for a config's
// prevResult: they read and write the JSON the library's types/100 and
// types/040 results do.
type (
	prevResult100 struct {
		CNIVersion string          `json:"cniVersion,omitempty"`
		Interfaces []*interface100 `json:"interfaces,omitempty"`
		IPs        []*ipConfig     `json:"ips,omitempty"`
		Routes     []*route        `json:"routes,omitempty"`
		DNS        *DNS            `json:"dns,omitempty"`
	}
	interface100 struct {
		Name       string `json:"name"`
		Mac        string `json:"mac,omitempty"`
		Mtu        int    `json:"mtu,omitempty"`
		Sandbox    string `json:"sandbox,omitempty"`
		SocketPath string `json:"socketPath,omitempty"`
		PciID      string `json:"pciID,omitempty"`
	}
	prevResult040 struct {
		CNIVersion string          `json:"cniVersion,omitempty"`
		Interfaces []*interface040 `json:"interfaces,omitempty"`
		IPs        []*ipConfig     `json:"ips,omitempty"`
		Routes     []*route        `json:"routes,omitempty"`
		DNS        DNS             `json:"dns"`
	}
	interface040 struct {
		Name    string `json:"name"`
		Mac     string `json:"mac,omitempty"`
		Sandbox string `json:"sandbox,omitempty"`
	}
	// ipConfig is both versions' address; 0.4.0's "version" is read and
	// dropped, as converting to 1.x drops it.
	ipConfig struct {
		Version   string `json:"version,omitempty"`
		Interface *int   `json:"interface,omitempty"`
		Address   ipNet  `json:"address"`
		Gateway   ipAddr `json:"gateway,omitzero"`
	}
	route struct {
		Dst      ipNet  `json:"dst"`
		GW       ipAddr `json:"gw,omitzero"`
		MTU      int    `json:"mtu,omitempty"`
		AdvMSS   int    `json:"advmss,omitempty"`
		Priority int    `json:"priority,omitempty"`
		Table    *int   `json:"table,omitempty"`
		Scope    *int   `json:"scope,omitempty"`
	}
)

var (
	versions100 = []string{"1.0.0", "1.1.0"}
	versions040 = []string{"0.3.0", "0.3.1", "0.4.0"}
)

// PrevResult converts a config's prevResult (raw, as decoded from the
// config) to the JSON of a 1.1.0 result, as the library's
// version.ParsePrevResult and types/100.NewResultFromResult do: the result
// is read in the config's version (confVersion), and it takes the
// config's cniVersion if it has none. It returns nil for no prevResult.
func PrevResult(raw map[string]any, confVersion string) ([]byte, error) {
	if raw == nil {
		return nil, nil
	}
	// The library looks for (and sets) "CNIVersion", which a result's own
	// "cniVersion", sorted after it, overrides when decoded.
	if v, ok := raw["CNIVersion"]; !ok || v == "" {
		raw["CNIVersion"] = confVersion
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("could not serialize prevResult: %w", err)
	}
	var r *prevResult100
	switch {
	case contains(versions100, confVersion):
		r, err = decode100(b)
	case contains(versions040, confVersion):
		r, err = decode040(b)
	default:
		err = fmt.Errorf("unsupported CNI result version %q", confVersion)
	}
	if err != nil {
		return nil, fmt.Errorf("could not parse prevResult: %w", err)
	}
	r.CNIVersion = Current
	for _, ip := range r.IPs {
		if ip != nil {
			ip.Version = ""
		}
	}
	if r.DNS != nil && r.DNS.IsEmpty() {
		r.DNS = nil
	}
	return json.Marshal(r)
}

// decode100 reads a 1.x result. The type is named Result, as the
// library's is, for encoding/json's messages.
func decode100(b []byte) (*prevResult100, error) {
	type Result prevResult100
	var r Result
	if err := decodeResult(b, &r, &r.CNIVersion, versions100); err != nil {
		return nil, err
	}
	return (*prevResult100)(&r), nil
}

// decode040 reads a 0.3.x or 0.4.0 result and converts it to 1.x as the
// library does (an interface keeps its name, MAC and sandbox; an address
// drops its version).
func decode040(b []byte) (*prevResult100, error) {
	type Result prevResult040
	var old Result
	if err := decodeResult(b, &old, &old.CNIVersion, versions040); err != nil {
		return nil, err
	}
	r := &prevResult100{IPs: old.IPs, Routes: old.Routes, DNS: &old.DNS}
	for _, ifc := range old.Interfaces {
		if ifc == nil {
			r.Interfaces = append(r.Interfaces, nil)
			continue
		}
		r.Interfaces = append(r.Interfaces, &interface100{Name: ifc.Name, Mac: ifc.Mac, Sandbox: ifc.Sandbox})
	}
	return r, nil
}

func decodeResult(b []byte, r any, version *string, supported []string) error {
	if err := json.Unmarshal(b, r); err != nil {
		return err
	}
	if !contains(supported, *version) {
		return fmt.Errorf("result type supports %v but unmarshalled CNIVersion is %q", supported, *version)
	}
	return nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// ipAddr is an IP address in a result, read as net.IP reads one (no
// zone; "" is none) and written as net.IP writes it (an IPv4-mapped
// address as IPv4).
type ipAddr struct{ netip.Addr }

func (a *ipAddr) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*a = ipAddr{}
		return nil
	}
	x, err := netip.ParseAddr(string(text))
	if err != nil || x.Zone() != "" {
		return fmt.Errorf("invalid IP address: %s", text)
	}
	*a = ipAddr{x}
	return nil
}

func (a ipAddr) MarshalText() ([]byte, error) {
	if !a.IsValid() {
		return []byte{}, nil
	}
	return []byte(a.Unmap().String()), nil
}

// ipNet is an address and prefix length, read as the library's
// types.IPNet reads one (net.ParseCIDR's syntax, the address kept as
// given) and written as it writes one.
type ipNet struct {
	addr netip.Addr
	bits int
}

func (n *ipNet) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	bad := fmt.Errorf("invalid CIDR address: %s", s)
	i := 0
	for i < len(s) && s[i] != '/' {
		i++
	}
	if i == len(s) {
		return bad
	}
	addr, err := netip.ParseAddr(s[:i])
	if err != nil || addr.Zone() != "" {
		return bad
	}
	bits, digits := 0, s[i+1:]
	for j := 0; j < len(digits); j++ {
		if digits[j] < '0' || digits[j] > '9' || bits > addr.BitLen() {
			return bad
		}
		bits = bits*10 + int(digits[j]-'0')
	}
	if digits == "" || bits > addr.BitLen() {
		return bad
	}
	*n = ipNet{addr, bits}
	return nil
}

func (n ipNet) MarshalJSON() ([]byte, error) {
	return json.Marshal(n.String())
}

// String is net.IPNet's: "<nil>" for none, an IPv4-mapped address with a
// prefix of 96 or more as IPv4.
func (n ipNet) String() string {
	a, bits := n.addr, n.bits
	switch {
	case !a.IsValid():
		return "<nil>"
	case a.Is4In6():
		// net.IPNet takes the mask's last four bytes for an IPv4 address.
		a, bits = a.Unmap(), max(bits-96, 0)
	}
	return a.String() + "/" + fmt.Sprint(bits)
}

// UnmarshalJSON decodes c through a type of its own, as the library's
// IPConfig does, so that encoding/json names the result's fields in its
// messages as it does for the library's.
func (c *ipConfig) UnmarshalJSON(data []byte) error {
	type ipConfig2 ipConfig
	return json.Unmarshal(data, (*ipConfig2)(c))
}

// UnmarshalJSON decodes r as ipConfig's does.
func (r *route) UnmarshalJSON(data []byte) error {
	type route2 route
	return json.Unmarshal(data, (*route2)(r))
}
