package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// SNATRules lists the rules of our SNAT chain as read back from the kernel,
// in nft's syntax (`ip daddr 10.0.0.0/16 return`, `counter packets 3 bytes
// 252 snat to 10.0.0.10 fully-random`). It returns nil when the table does
// not exist. Rendering the kernel's expressions, rather than our comments,
// is what makes it usable to check the real state.
func (l *Linux) SNATRules() ([]string, error) {
	conn, err := l.nft()
	if err != nil {
		return nil, err
	}
	t, err := conn.ListTableOfFamily(NFTTable, nftables.TableFamilyIPv4)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, fmt.Errorf("list nftables table %s: %w", NFTTable, err)
	}
	rules, err := conn.GetRules(t, &nftables.Chain{Name: NFTChain, Table: t})
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return []string{}, nil
		}
		return nil, fmt.Errorf("list nftables chain %s: %w", NFTChain, err)
	}
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		out = append(out, render(r.Exprs, true))
	}
	return out, nil
}

func renderAll(rules [][]expr.Any, counters bool) []string {
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		out = append(out, render(r, counters))
	}
	return out
}

// withoutCounters strips the packet and byte counts, for comparing the
// rules in force with the rules wanted.
func withoutCounters(rules []string) []string {
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		f := strings.Fields(r)
		var kept []string
		for i := 0; i < len(f); i++ {
			if (f[i] == "packets" || f[i] == "bytes") && i+1 < len(f) {
				i++
				continue
			}
			kept = append(kept, f[i])
		}
		out = append(out, strings.Join(kept, " "))
	}
	return out
}

// render prints the expressions this package generates in nft's syntax;
// anything else is shown as <kind> so a foreign rule never reads as ours.
func render(exprs []expr.Any, counters bool) string {
	var words []string
	var pending string       // the left-hand side loaded into register 1
	var mask net.IPMask      // a bitwise mask applied to it
	var immediate netip.Addr // an address loaded for NAT
	for _, e := range exprs {
		switch e := e.(type) {
		case *expr.Meta:
			switch e.Key {
			case expr.MetaKeyOIFNAME:
				pending = "oifname"
			case expr.MetaKeyIIFNAME:
				pending = "iifname"
			default:
				pending = fmt.Sprintf("meta(%d)", e.Key)
			}
		case *expr.Payload:
			switch {
			case e.Base == expr.PayloadBaseNetworkHeader && e.Offset == offsetSaddr && e.Len == 4:
				pending = "ip saddr"
			case e.Base == expr.PayloadBaseNetworkHeader && e.Offset == offsetDaddr && e.Len == 4:
				pending = "ip daddr"
			default:
				pending = fmt.Sprintf("payload(%d,%d,%d)", e.Base, e.Offset, e.Len)
			}
		case *expr.Bitwise:
			mask = net.IPMask(e.Mask)
		case *expr.Cmp:
			op := ""
			if e.Op == expr.CmpOpNeq {
				op = "!= "
			} else if e.Op != expr.CmpOpEq {
				op = fmt.Sprintf("op%d ", e.Op)
			}
			words = append(words, pending, op+renderValue(pending, e.Data, mask))
			pending, mask = "", nil
		case *expr.Counter:
			if counters {
				words = append(words, fmt.Sprintf("counter packets %d bytes %d", e.Packets, e.Bytes))
			} else {
				words = append(words, "counter")
			}
		case *expr.Immediate:
			if a, ok := netip.AddrFromSlice(e.Data); ok && len(e.Data) == 4 {
				immediate = a
			}
		case *expr.NAT:
			w := "nat"
			if e.Type == expr.NATTypeSourceNAT {
				w = "snat"
			}
			if e.RegAddrMin != 0 && immediate.IsValid() {
				w += " to " + immediate.String()
			}
			if e.FullyRandom {
				w += " fully-random"
			} else if e.Random {
				w += " random"
			}
			words = append(words, w)
		case *expr.Verdict:
			switch e.Kind {
			case expr.VerdictReturn:
				words = append(words, "return")
			case expr.VerdictAccept:
				words = append(words, "accept")
			case expr.VerdictDrop:
				words = append(words, "drop")
			default:
				words = append(words, fmt.Sprintf("verdict(%d)", e.Kind))
			}
		default:
			words = append(words, fmt.Sprintf("<%T>", e))
		}
	}
	return strings.Join(words, " ")
}

func renderValue(lhs string, data []byte, mask net.IPMask) string {
	switch {
	case strings.HasSuffix(lhs, "ifname"):
		return fmt.Sprintf("%q", strings.TrimRight(string(data), "\x00"))
	case strings.HasPrefix(lhs, "ip ") && len(data) == 4:
		a := netip.AddrFrom4([4]byte(data))
		if mask != nil {
			ones, _ := mask.Size()
			return netip.PrefixFrom(a, ones).String()
		}
		return a.String()
	default:
		return fmt.Sprintf("%x", data)
	}
}
