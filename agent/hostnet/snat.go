package hostnet

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The nftables objects SetupSNAT owns, whole: nothing else may live in them.
const (
	NFTTable = "allot"
	NFTChain = "postrouting"
)

// SetupSNAT makes the node translate pod traffic that leaves the VPC to the
// node's primary address on the primary interface, the way aws-vpc-cni's
// AWS-SNAT-CHAIN does, in an nftables table of our own:
//
//	oifname != <primary> return
//	ip saddr <primary IP> return          (the node's own traffic keeps its ports)
//	ip daddr <VPC CIDR> return            (one per CIDR)
//	ip daddr <excluded CIDR> return       (one per CIDR)
//	counter snat to <primary IP> fully-random
//
// Translated traffic must also leave by the primary interface, so policy
// rules send everything outside the VPC and excluded CIDRs to the main
// table before a pod's source rule could send it out of a secondary ENI:
//
//	1024: to <VPC or excluded CIDR> goto 1536
//	1025: lookup main
//
// With External set, the table and both kinds of rules are removed. The
// table is replaced in one netlink batch, so there is no moment without it.
func (l *Linux) SetupSNAT(c SNATConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	l.snatMu.Lock()
	defer l.snatMu.Unlock()
	if c.External {
		if err := l.replaceSNATTable(nil); err != nil {
			return fmt.Errorf("remove SNAT: %w", err)
		}
		if err := l.syncSNATRules(nil); err != nil {
			return fmt.Errorf("remove SNAT: %w", err)
		}
		return nil
	}
	mac, _ := parseMAC(c.PrimaryMAC)
	link, err := l.waitLinkByMAC(mac)
	if err != nil {
		return fmt.Errorf("setup SNAT: primary interface: %w", err)
	}
	want := snatRules(link.Attrs().Name, c)
	have, err := l.SNATRules()
	if err != nil {
		return fmt.Errorf("setup SNAT: %w", err)
	}
	if !slices.Equal(withoutCounters(have), renderAll(want, false)) {
		if err := l.replaceSNATTable(want); err != nil {
			return fmt.Errorf("setup SNAT: %w", err)
		}
	}
	untranslated := append(append([]netip.Prefix{}, c.VPCCIDRs...), c.ExcludeCIDRs...)
	if err := l.syncSNATRules(untranslated); err != nil {
		return fmt.Errorf("setup SNAT: %w", err)
	}
	return nil
}

func (l *Linux) nft() (*nftables.Conn, error) {
	conn, err := nftables.New(nftables.WithNetNSFd(int(l.nodeNS)))
	if err != nil {
		return nil, fmt.Errorf("open nftables: %w", err)
	}
	return conn, nil
}

var snatTable = &nftables.Table{Family: nftables.TableFamilyIPv4, Name: NFTTable}

// replaceSNATTable deletes the table and, if rules is non-nil, recreates it
// holding them, all in one batch. Adding the table first makes the delete
// valid when it does not exist yet.
func (l *Linux) replaceSNATTable(rules [][]expr.Any) error {
	conn, err := l.nft()
	if err != nil {
		return err
	}
	conn.AddTable(snatTable)
	conn.DelTable(snatTable)
	if rules != nil {
		t := conn.AddTable(snatTable)
		ch := conn.AddChain(&nftables.Chain{
			Name:     NFTChain,
			Table:    t,
			Type:     nftables.ChainTypeNAT,
			Hooknum:  nftables.ChainHookPostrouting,
			Priority: nftables.ChainPriorityNATSource,
		})
		for _, exprs := range rules {
			conn.AddRule(&nftables.Rule{
				Table:    t,
				Chain:    ch,
				Exprs:    exprs,
				UserData: userdata.AppendString(nil, userdata.TypeComment, "allot: "+render(exprs, false)),
			})
		}
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("replace nftables table %s: %w", NFTTable, err)
	}
	return nil
}

// snatRules builds the chain's rules, in order.
func snatRules(primaryIf string, c SNATConfig) [][]expr.Any {
	ret := &expr.Verdict{Kind: expr.VerdictReturn}
	rules := [][]expr.Any{
		{
			&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ifnameBytes(primaryIf)},
			ret,
		},
		append(matchAddr(offsetSaddr, netip.PrefixFrom(c.PrimaryIP, 32)), ret),
	}
	for _, p := range c.VPCCIDRs {
		rules = append(rules, append(matchAddr(offsetDaddr, p), ret))
	}
	for _, p := range c.ExcludeCIDRs {
		rules = append(rules, append(matchAddr(offsetDaddr, p), ret))
	}
	ip := c.PrimaryIP.As4()
	rules = append(rules, []expr.Any{
		&expr.Counter{},
		&expr.Immediate{Register: 1, Data: ip[:]},
		&expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, FullyRandom: true},
	})
	return rules
}

// IPv4 header offsets of the source and destination addresses.
const (
	offsetSaddr = 12
	offsetDaddr = 16
)

// matchAddr matches the IPv4 source or destination against a prefix.
func matchAddr(offset uint32, p netip.Prefix) []expr.Any {
	p = p.Masked()
	addr := p.Addr().As4()
	load := &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4}
	cmp := &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr[:]}
	if p.Bits() == 32 {
		return []expr.Any{load, cmp}
	}
	mask := prefixToIPNet(p).Mask
	return []expr.Any{load,
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		cmp}
}

// ifnameBytes is an interface name as the kernel compares it: NUL-padded
// to IFNAMSIZ, so "eth0" does not also match "eth01".
func ifnameBytes(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// syncSNATRules makes the rules at PriorityVPCGoto and PriorityNonVPCMain
// exactly those for the untranslated CIDRs; none at all when nil.
func (l *Linux) syncSNATRules(untranslated []netip.Prefix) error {
	var want []*netlink.Rule
	for _, p := range untranslated {
		r := netlink.NewRule()
		r.Family = unix.AF_INET
		r.Priority = PriorityVPCGoto
		r.Dst = prefixToIPNet(p.Masked())
		r.Goto = PriorityFromPod
		want = append(want, r)
	}
	if untranslated != nil {
		r := netlink.NewRule()
		r.Family = unix.AF_INET
		r.Priority = PriorityNonVPCMain
		r.Table = mainTable
		want = append(want, r)
	}
	have, err := l.allRules()
	if err != nil {
		return err
	}
	key := func(r *netlink.Rule) string {
		return fmt.Sprintf("%d %s %d %d", r.Priority, ipNetString(r.Dst), r.Goto, r.Table)
	}
	wanted := map[string]bool{}
	for _, r := range want {
		wanted[key(r)] = true
	}
	present := map[string]bool{}
	for _, r := range have {
		if r.Priority != PriorityVPCGoto && r.Priority != PriorityNonVPCMain {
			continue
		}
		if r.Goto <= 0 {
			r.Goto = -1
		}
		k := key(&r)
		if wanted[k] && !present[k] && r.Src == nil {
			present[k] = true
			continue
		}
		if err := l.nl.RuleDel(&r); err != nil && !isNotFound(err) {
			return fmt.Errorf("remove SNAT rule %v: %w", r, err)
		}
	}
	for _, r := range want {
		if !present[key(r)] {
			if err := l.addRule(r); err != nil {
				return err
			}
		}
	}
	return nil
}
