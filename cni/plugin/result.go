package plugin

import (
	"io"
	"net"
	"strconv"
	"unicode/utf8"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// printResult writes the ADD's result in the runtime's spec version. For
// 1.0.0 and 1.1.0, whose result is current's as it is, it writes the JSON
// itself: encoding/json builds its encoders by reflection the first time a
// process prints a type, and that was most of what printing cost a plugin
// exec (0.2–0.3 ms, every ADD). Other versions, and any result with what
// appendResult does not write, go through the CNI library. The two are
// the same JSON (TestResultJSONMatchesTheLibrary).
func printResult(w io.Writer, r *current.Result, version string) error {
	if version == "1.0.0" || version == "1.1.0" {
		if b, ok := appendResult(nil, r, version); ok {
			_, err := w.Write(b)
			return err
		}
	}
	out, err := r.GetAsVersion(version)
	if err != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, "cannot convert the result to the requested cniVersion", err.Error())
	}
	return out.PrintTo(w)
}

// appendResult appends r as JSON with cniVersion version; ok is false if r
// holds something it does not write (route options, strings that are not
// UTF-8), for the library to print instead.
func appendResult(b []byte, r *current.Result, version string) (_ []byte, ok bool) {
	b = append(b, `{"cniVersion":`...)
	b = appendString(b, version)
	if len(r.Interfaces) > 0 {
		b = append(b, `,"interfaces":[`...)
		for i, ifc := range r.Interfaces {
			if ifc == nil {
				return nil, false
			}
			b = appendComma(b, i)
			b = append(b, `{"name":`...)
			b = appendString(b, ifc.Name)
			b = appendOptString(b, "mac", ifc.Mac)
			if ifc.Mtu != 0 {
				b = append(b, `,"mtu":`...)
				b = strconv.AppendInt(b, int64(ifc.Mtu), 10)
			}
			b = appendOptString(b, "sandbox", ifc.Sandbox)
			b = appendOptString(b, "socketPath", ifc.SocketPath)
			b = appendOptString(b, "pciID", ifc.PciID)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if b, ok = appendIPs(b, r.IPs); !ok {
		return nil, false
	}
	if b, ok = appendRoutes(b, r.Routes); !ok {
		return nil, false
	}
	if !r.DNS.IsEmpty() { // the library leaves an empty one out
		b = append(b, `,"dns":{`...)
		n := len(b)
		b = appendStrings(b, "nameservers", r.DNS.Nameservers)
		b = appendOptString(b, "domain", r.DNS.Domain)
		b = appendStrings(b, "search", r.DNS.Search)
		b = appendStrings(b, "options", r.DNS.Options)
		b = append(b[:n], b[n+1:]...) // the first field's comma
		b = append(b, '}')
	}
	b = append(b, '}')
	return b, utf8.Valid(b)
}

func appendIPs(b []byte, ips []*current.IPConfig) ([]byte, bool) {
	if len(ips) == 0 {
		return b, true
	}
	b = append(b, `,"ips":[`...)
	for i, ip := range ips {
		if ip == nil || ip.Address.IP == nil {
			return nil, false
		}
		b = appendComma(b, i)
		b = append(b, '{')
		if ip.Interface != nil {
			b = append(b, `"interface":`...)
			b = strconv.AppendInt(b, int64(*ip.Interface), 10)
			b = append(b, ',')
		}
		b = append(b, `"address":`...)
		b = appendString(b, ip.Address.String())
		b = appendIP(b, "gateway", ip.Gateway)
		b = append(b, '}')
	}
	return append(b, ']'), true
}

func appendRoutes(b []byte, routes []*types.Route) ([]byte, bool) {
	if len(routes) == 0 {
		return b, true
	}
	b = append(b, `,"routes":[`...)
	for i, rt := range routes {
		if rt == nil || rt.Dst.IP == nil || rt.MTU != 0 || rt.AdvMSS != 0 || rt.Priority != 0 || rt.Table != nil || rt.Scope != nil {
			return nil, false
		}
		b = appendComma(b, i)
		b = append(b, `{"dst":`...)
		b = appendString(b, rt.Dst.String())
		b = appendIP(b, "gw", rt.GW)
		b = append(b, '}')
	}
	return append(b, ']'), true
}

func appendComma(b []byte, i int) []byte {
	if i > 0 {
		return append(b, ',')
	}
	return b
}

// appendIP appends ,"key":"ip" unless ip is empty (omitempty).
func appendIP(b []byte, key string, ip net.IP) []byte {
	if len(ip) == 0 {
		return b
	}
	return appendOptString(b, key, ip.String())
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

// appendString appends s as a JSON string. Characters JSON requires
// escaped are; the rest is copied (appendResult refuses what is not UTF-8).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
