package cnispec

import (
	"net/netip"
	"strconv"
	"unicode/utf8"
)

// DNS is a network's DNS settings, in the config and in a result.
type DNS struct {
	Nameservers []string `json:"nameservers,omitempty"`
	Domain      string   `json:"domain,omitempty"`
	Search      []string `json:"search,omitempty"`
	Options     []string `json:"options,omitempty"`
}

// IsEmpty reports whether d sets nothing (a result then leaves it out).
func (d DNS) IsEmpty() bool {
	return len(d.Nameservers) == 0 && d.Domain == "" && len(d.Search) == 0 && len(d.Options) == 0
}

// Result is an ADD's result: what allot's results hold of the spec's.
type Result struct {
	Interfaces []Interface
	IPs        []IPConfig
	Routes     []Route
	DNS        DNS
}

// Interface is an interface the ADD created.
type Interface struct {
	Name, Mac, Sandbox string
}

// IPConfig is an address on the result's Interfaces[Interface].
type IPConfig struct {
	Interface int
	Address   netip.Prefix
	Gateway   netip.Addr // the zero Addr for none
}

// Route is a route in the pod's namespace.
type Route struct {
	Dst netip.Prefix
	GW  netip.Addr // the zero Addr for none
}

// Append appends r as JSON for spec version version, which the caller has
// checked is one the plugin speaks (0.4.0 and later): the JSON the library
// prints for the same result converted to that version, unindented.
func (r *Result) Append(b []byte, version string) []byte {
	v040 := version == "0.3.0" || version == "0.3.1" || version == "0.4.0"
	b = append(b, `{"cniVersion":`...)
	b = appendString(b, version)
	if len(r.Interfaces) > 0 {
		b = append(b, `,"interfaces":[`...)
		for i, ifc := range r.Interfaces {
			b = appendComma(b, i)
			b = append(b, `{"name":`...)
			b = appendString(b, ifc.Name)
			b = appendOptString(b, "mac", ifc.Mac)
			b = appendOptString(b, "sandbox", ifc.Sandbox)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendIPs(b, r.IPs, v040)
	b = appendRoutes(b, r.Routes)
	// Before 1.0.0 the library prints dns even when it is empty.
	if v040 || !r.DNS.IsEmpty() {
		b = append(b, `,"dns":{`...)
		n := len(b)
		b = appendStrings(b, "nameservers", r.DNS.Nameservers)
		b = appendOptString(b, "domain", r.DNS.Domain)
		b = appendStrings(b, "search", r.DNS.Search)
		b = appendStrings(b, "options", r.DNS.Options)
		if len(b) > n {
			b = append(b[:n], b[n+1:]...) // the first field's comma
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendIPs(b []byte, ips []IPConfig, withVersion bool) []byte {
	if len(ips) == 0 {
		return b
	}
	b = append(b, `,"ips":[`...)
	for i, ip := range ips {
		b = appendComma(b, i)
		b = append(b, '{')
		if withVersion {
			v := "6"
			if ip.Address.Addr().Unmap().Is4() {
				v = "4"
			}
			b = append(b, `"version":"`...)
			b = append(b, v...)
			b = append(b, `",`...)
		}
		b = append(b, `"interface":`...)
		b = strconv.AppendInt(b, int64(ip.Interface), 10)
		b = append(b, `,"address":`...)
		b = appendString(b, ip.Address.String())
		b = appendAddr(b, "gateway", ip.Gateway)
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendRoutes(b []byte, routes []Route) []byte {
	if len(routes) == 0 {
		return b
	}
	b = append(b, `,"routes":[`...)
	for i, rt := range routes {
		b = appendComma(b, i)
		b = append(b, `{"dst":`...)
		b = appendString(b, rt.Dst.String())
		b = appendAddr(b, "gw", rt.GW)
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendComma(b []byte, i int) []byte {
	if i > 0 {
		return append(b, ',')
	}
	return b
}

// appendAddr appends ,"key":"addr" unless addr is the zero Addr.
func appendAddr(b []byte, key string, a netip.Addr) []byte {
	if !a.IsValid() {
		return b
	}
	return appendOptString(b, key, a.Unmap().String())
}

// appendOptString appends ,"key":"s" unless s is empty (omitempty).
func appendOptString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendString(b, s)
}

// appendStrings appends ,"key":[...] unless l is empty (omitempty).
func appendStrings(b []byte, key string, l []string) []byte {
	if len(l) == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, `":[`...)
	for i, s := range l {
		b = appendComma(b, i)
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendString appends s as a JSON string, as encoding/json writes it:
// '<', '>' and '&' escaped, and bytes that are not UTF-8 as U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
