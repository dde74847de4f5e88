package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// The VPC namespace's nftables objects, rewritten whole on every change:
//
//	table ip allot-vpc {
//	  set src-<link> { type ipv4_addr; flags interval; elements = { <what the ENI owns> } }
//	  set node-primaries { type ipv4_addr; elements = { <primary address of each node> } }
//	  chain srccheck { type filter hook prerouting priority filter;
//	    iifname "<link>" ip saddr != @src-<link> counter drop   # one per ENI with the check on
//	  }
//	  chain outside { type filter hook forward priority filter;
//	    oifname "outside" ip saddr != @node-primaries counter drop
//	    iifname "outside" ip daddr != @node-primaries counter drop
//	  }
//	}
//
// The source check sits in prerouting so that it also covers packets for
// the router itself. Each rule's comment names what it is for
// ("srccheck <eni>", "outside-egress", "outside-ingress").
const (
	nftTable        = "allot-vpc"
	nftChainSrc     = "srccheck"
	nftChainOutside = "outside"
	nftSetPrimaries = "node-primaries"
)

// Rule comments, for reading the counters back.
const (
	commentOutsideEgress  = "outside-egress"
	commentOutsideIngress = "outside-ingress"
	commentSrcPrefix      = "srccheck "
)

// IPv4 header offsets of the source and destination addresses.
const (
	offsetSaddr = 12
	offsetDaddr = 16
)

// writeRules replaces the table in one netlink batch, so no packet ever
// meets a half-written rule set.
func (p *Plane) writeRules() error {
	conn, err := nftables.New(nftables.WithNetNSFd(int(p.vpc.Handle())))
	if err != nil {
		return fmt.Errorf("open nftables in vpc netns: %w", err)
	}
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: nftTable}
	conn.AddTable(t) // makes the delete valid when the table does not exist yet
	conn.DelTable(t)
	t = conn.AddTable(t)
	src := conn.AddChain(&nftables.Chain{
		Name: nftChainSrc, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityFilter,
	})
	links := make([]*eniLink, 0, len(p.enis))
	for _, l := range p.enis {
		links = append(links, l)
	}
	slices.SortFunc(links, func(a, b *eniLink) int { return strings.Compare(a.name, b.name) })
	var primaries []nftables.SetElement
	for _, l := range links {
		if l.device == 0 {
			a := l.primary.As4()
			primaries = append(primaries, nftables.SetElement{Key: a[:]})
		}
		if !l.check {
			continue
		}
		set := &nftables.Set{Table: t, Name: "src-" + l.name, KeyType: nftables.TypeIPAddr, Interval: true}
		if err := conn.AddSet(set, intervalElements(l.sources)); err != nil {
			return fmt.Errorf("nftables set %s: %w", set.Name, err)
		}
		conn.AddRule(&nftables.Rule{Table: t, Chain: src, UserData: comment(commentSrcPrefix + l.eniID),
			Exprs: dropUnless(expr.MetaKeyIIFNAME, l.name, offsetSaddr, set)})
	}
	prim := &nftables.Set{Table: t, Name: nftSetPrimaries, KeyType: nftables.TypeIPAddr}
	if err := conn.AddSet(prim, primaries); err != nil {
		return fmt.Errorf("nftables set %s: %w", prim.Name, err)
	}
	out := conn.AddChain(&nftables.Chain{
		Name: nftChainOutside, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter,
	})
	conn.AddRule(&nftables.Rule{Table: t, Chain: out, UserData: comment(commentOutsideEgress),
		Exprs: dropUnless(expr.MetaKeyOIFNAME, outsideLink, offsetSaddr, prim)})
	conn.AddRule(&nftables.Rule{Table: t, Chain: out, UserData: comment(commentOutsideIngress),
		Exprs: dropUnless(expr.MetaKeyIIFNAME, outsideLink, offsetDaddr, prim)})
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("write nftables table %s in vpc netns: %w", nftTable, err)
	}
	return nil
}

// dropUnless is `<iif|oif>name "<link>" ip <saddr|daddr> != @set counter drop`.
func dropUnless(key expr.MetaKey, link string, offset uint32, set *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(link)},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID, Invert: true},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}
}

func comment(s string) []byte { return userdata.AppendString(nil, userdata.TypeComment, s) }

// ifname is an interface name as the kernel compares it: NUL-padded to
// IFNAMSIZ, so "e1" does not also match "e12".
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// intervalElements turns sorted prefixes into an interval set's elements,
// merging ranges that touch: the kernel refuses an interval end and the next
// start on the same key.
func intervalElements(ps []netip.Prefix) []nftables.SetElement {
	type span struct{ lo, hi uint64 } // [lo, hi)
	var spans []span
	for _, p := range ps {
		p = p.Masked()
		lo := uint64(binary.BigEndian.Uint32(p.Addr().AsSlice()))
		s := span{lo, lo + 1<<(32-p.Bits())}
		if n := len(spans); n > 0 && s.lo <= spans[n-1].hi {
			spans[n-1].hi = max(spans[n-1].hi, s.hi)
			continue
		}
		spans = append(spans, s)
	}
	var out []nftables.SetElement
	for _, s := range spans {
		out = append(out, nftables.SetElement{Key: binary.BigEndian.AppendUint32(nil, uint32(s.lo))})
		if s.hi <= 1<<32-1 {
			out = append(out, nftables.SetElement{Key: binary.BigEndian.AppendUint32(nil, uint32(s.hi)), IntervalEnd: true})
		}
	}
	return out
}
