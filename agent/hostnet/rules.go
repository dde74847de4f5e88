package hostnet

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// toPodRule is `to <pod>/32 lookup main` at PriorityToPod.
func toPodRule(addr netip.Addr) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = unix.AF_INET
	r.Priority = PriorityToPod
	r.Dst = host32(addr)
	r.Table = mainTable
	return r
}

// fromPodRule is `from <pod>/32 lookup <table>` at PriorityFromPod.
func fromPodRule(addr netip.Addr, table int) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = unix.AF_INET
	r.Priority = PriorityFromPod
	r.Src = host32(addr)
	r.Table = table
	return r
}

// addRule adds a rule; an identical rule already present is success.
func (l *Linux) addRule(r *netlink.Rule) error {
	if err := l.nl.RuleAdd(r); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add rule %v: %w", r, err)
	}
	return nil
}

// rulesAt lists the IPv4 rules at one priority.
func (l *Linux) rulesAt(prio int) ([]netlink.Rule, error) {
	all, err := l.allRules()
	if err != nil {
		return nil, err
	}
	var out []netlink.Rule
	for _, r := range all {
		if r.Priority == prio {
			out = append(out, r)
		}
	}
	return out, nil
}

func (l *Linux) allRules() ([]netlink.Rule, error) {
	rules, err := retryDump(func() ([]netlink.Rule, error) { return l.nl.RuleList(unix.AF_INET) })
	if err != nil {
		return nil, fmt.Errorf("list rules: %w", err)
	}
	return rules, nil
}

// maxFromRules bounds dropFromRules: an address has one source rule, and
// more than a few are no state this agent makes.
const maxFromRules = 64

// dropFromRules removes every source rule of addr at PriorityFromPod,
// whatever its table, one request each and one more that finds none, in
// place of listing every rule of the node: a request naming no table
// matches a rule of any table.
func (l *Linux) dropFromRules(addr netip.Addr) error {
	r := fromPodRule(addr, 0)
	for range maxFromRules {
		err := l.nl.RuleDel(r)
		switch {
		case isNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("remove rule from %s: %w", addr, err)
		}
	}
	return fmt.Errorf("remove rules from %s: still more after %d", addr, maxFromRules)
}

// deletePodRules removes the per-pod rules of one address: its `to` rule
// and its `from` rules (only the one into table, if table is non-zero).
func (l *Linux) deletePodRules(addr netip.Addr, table int) error {
	if err := l.nl.RuleDel(toPodRule(addr)); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove rule to %s: %w", addr, err)
	}
	rules, err := l.rulesAt(PriorityFromPod)
	if err != nil {
		return err
	}
	want := host32(addr).String()
	for _, r := range rules {
		if r.Src == nil || r.Src.String() != want || (table != 0 && r.Table != table) {
			continue
		}
		if err := l.nl.RuleDel(&r); err != nil && !isNotFound(err) {
			return fmt.Errorf("remove rule from %s: %w", addr, err)
		}
	}
	return nil
}
