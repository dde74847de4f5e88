package pool

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/allotnet/allot/agent/checkpoint"
)

var m5large = Limits{MaxENIs: 3, IPv4PerENI: 10}

func TestShortfall(t *testing.T) {
	pd := func(tg Targets) Targets { tg.PrefixMode = true; return tg }
	cases := []struct {
		name string
		t    Targets
		l    Limits
		s    Stats
		want int
	}{
		// WARM_ENI_TARGET (secondary IPs): whole ENIs' worth (9 on m5.large).
		{"eni target, empty pool", Targets{WarmENIs: 1}, m5large, Stats{}, 9},
		{"eni target, one full spare ENI", Targets{WarmENIs: 1}, m5large, Stats{Total: 9}, 0},
		{"eni target, one short rounds to an ENI", Targets{WarmENIs: 1}, m5large, Stats{Total: 9, Assigned: 1}, 9},
		{"eni target 2", Targets{WarmENIs: 2}, m5large, Stats{Total: 9, Assigned: 5}, 18},
		{"eni target capped by max ENIs", Targets{WarmENIs: 1}, m5large, Stats{Total: 18, Assigned: 18}, 9},
		{"node full", Targets{WarmENIs: 1}, m5large, Stats{Total: 27, Assigned: 27}, 0},
		{"eni target 0 grows only when empty", Targets{}, m5large, Stats{}, 9},
		{"eni target 0 with one available", Targets{}, m5large, Stats{Total: 9, Assigned: 8}, 0},
		{"unknown limits", Targets{WarmENIs: 1}, Limits{}, Stats{}, 0},
		// WARM_IP_TARGET / MINIMUM_IP_TARGET.
		{"warm ip short", Targets{WarmIPs: 5}, m5large, Stats{Total: 10, Assigned: 8}, 3},
		{"cooling counts as available", Targets{WarmIPs: 5}, m5large, Stats{Total: 10, Assigned: 5, Cooling: 3}, 0},
		{"minimum dominates", Targets{WarmIPs: 1, MinimumIPs: 12}, m5large, Stats{Total: 9}, 3},
		{"minimum alone", Targets{MinimumIPs: 12}, m5large, Stats{}, 12},
		{"ip targets override eni target", Targets{WarmIPs: 5, WarmENIs: 3}, m5large, Stats{}, 5},
		{"max ENIs caps", Targets{WarmIPs: 20, MaxENIs: 1}, m5large, Stats{}, 9},
		{"max ENIs above type limit is the type limit", Targets{WarmIPs: 40, MaxENIs: 9}, m5large, Stats{}, 27},
		{"max pods reached", Targets{WarmIPs: 5, MaxPods: 10}, m5large, Stats{Total: 10, Assigned: 10}, 0},
		{"releasing takes room", Targets{WarmIPs: 10}, m5large, Stats{Total: 20, Assigned: 20, Releasing: 7}, 0},
		// WARM_PREFIX_TARGET (prefix mode): 16 per prefix, 144 per m5.large ENI.
		{"prefix target, empty", pd(Targets{WarmPrefixes: 1}), m5large, Stats{}, 16},
		{"prefix target, one prefix one used", pd(Targets{WarmPrefixes: 1}), m5large, Stats{Total: 16, Assigned: 1, Prefixes: 1}, 16},
		{"prefix target met", pd(Targets{WarmPrefixes: 1}), m5large, Stats{Total: 32, Assigned: 1, Prefixes: 2, FreePrefixes: 1}, 0},
		{"prefix target 3, one free", pd(Targets{WarmPrefixes: 3}), m5large, Stats{Total: 16, Prefixes: 1, FreePrefixes: 1}, 32},
		{"prefix mode warm ip rounds up", pd(Targets{WarmIPs: 5}), m5large, Stats{Total: 16, Assigned: 12, Prefixes: 1}, 16},
		{"prefix mode minimum", pd(Targets{WarmIPs: 1, MinimumIPs: 40}), m5large, Stats{Total: 16, Prefixes: 1, FreePrefixes: 1}, 32},
		{"prefix mode full", pd(Targets{WarmPrefixes: 1}), m5large, Stats{Total: 432, Assigned: 432, Prefixes: 27}, 0},
		{"prefix room rounds down to prefixes", pd(Targets{WarmIPs: 64}), m5large, Stats{Total: 400, Assigned: 400, Prefixes: 25}, 32},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Shortfall(tc.t, tc.l, tc.s); got != tc.want {
				t.Fatalf("Shortfall = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestCapacity(t *testing.T) {
	if got := Capacity(Targets{}, m5large); got != 27 {
		t.Errorf("secondary m5.large: %d", got)
	}
	if got := Capacity(Targets{PrefixMode: true}, Limits{MaxENIs: 4, IPv4PerENI: 15}); got != 4*14*16 {
		t.Errorf("prefix c5.xlarge: %d", got)
	}
	if got := Capacity(Targets{MaxENIs: 2}, m5large); got != 18 {
		t.Errorf("max ENIs 2: %d", got)
	}
}

func TestTargetsValidate(t *testing.T) {
	cases := []struct {
		t  Targets
		ok bool
	}{
		{DefaultTargets(false), true},
		{DefaultTargets(true), true},
		{Targets{WarmIPs: -1}, false},
		{Targets{MaxENIs: -2}, false},
		{Targets{PrefixMode: true}, false},
		{Targets{PrefixMode: true, MinimumIPs: 3}, true},
		{Targets{}, true},
	}
	for _, tc := range cases {
		if err := tc.t.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate = %v, want ok=%v", tc.t, err, tc.ok)
		}
	}
}

// Helpers to draw pools compactly. States: A assigned, C cooling, F free,
// R releasing.
func st(c byte) checkpoint.AddressState {
	return map[byte]checkpoint.AddressState{'A': checkpoint.Assigned, 'C': checkpoint.Cooling,
		'F': checkpoint.Free, 'R': checkpoint.Releasing}[c]
}

// secENI draws an ENI with secondary IPs 10.0.<dev>.1.. in the given states.
func secENI(id string, dev int, states string) ENIView {
	e := ENIView{ID: id, DeviceIndex: dev, Primary: dev == 0}
	for i := range len(states) {
		e.Addrs = append(e.Addrs, AddrView{Addr: netip.MustParseAddr(fmt.Sprintf("10.0.%d.%d", dev, i+1)), State: st(states[i])})
	}
	return e
}

// pfx is the n-th /28 of 10.1.0.0/16.
func pfx(n int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("10.1.%d.%d/28", n/16, (n%16)*16))
}

// pdENI draws an ENI with prefixes; each string gives the 16 states of one
// prefix compactly: "F" (all free), "A" (first assigned, rest free), or 16
// explicit states.
func pdENI(id string, dev int, first int, prefixes ...string) ENIView {
	e := ENIView{ID: id, DeviceIndex: dev, Primary: dev == 0}
	for i, s := range prefixes {
		p := pfx(first + i)
		switch s {
		case "F":
			s = "FFFFFFFFFFFFFFFF"
		case "A":
			s = "AFFFFFFFFFFFFFFF"
		}
		a := p.Addr()
		for j := range 16 {
			e.Addrs = append(e.Addrs, AddrView{Addr: a, Prefix: p, State: st(s[j])})
			a = a.Next()
		}
	}
	return e
}

func ips(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, x := range s {
		out = append(out, netip.MustParseAddr(x))
	}
	return out
}

// TestExcess: what the warm targets keep free, and so how many free
// addresses the agent states as excess, with the meaning aws-vpc-cni gives
// its targets.
func TestExcess(t *testing.T) {
	pd := func(tg Targets) Targets { tg.PrefixMode = true; return tg }
	cases := []struct {
		name           string
		t              Targets
		l              Limits
		assigned, free int
		want           int
	}{
		{"no target set: nothing is excess", Targets{}, m5large, 0, 18, 0},
		{"warm ip: beyond the target", Targets{WarmIPs: 14}, m5large, 0, 18, 4},
		{"warm ip: at the target", Targets{WarmIPs: 2}, m5large, 5, 2, 0},
		{"minimum ip counts held addresses", Targets{MinimumIPs: 10}, m5large, 8, 1, 0},
		{"minimum ip: beyond it", Targets{MinimumIPs: 10}, m5large, 8, 5, 3},
		{"warm and minimum: the larger keep wins", Targets{WarmIPs: 2, MinimumIPs: 10}, m5large, 0, 5, 0},
		{"warm eni keeps one ENI's worth", Targets{WarmENIs: 1}, m5large, 0, 18, 9},
		{"warm eni: less than an ENI's worth beyond it is kept", Targets{WarmENIs: 1}, m5large, 3, 17, 0},
		{"warm eni: excess in whole ENIs' worth", Targets{WarmENIs: 1}, m5large, 0, 35, 18},
		{"two warm enis", Targets{WarmENIs: 2}, m5large, 0, 35, 9},
		{"ip targets win over warm eni", Targets{WarmENIs: 1, WarmIPs: 3}, m5large, 0, 18, 15},
		{"warm eni with unknown limits: nothing", Targets{WarmENIs: 1}, Limits{}, 0, 18, 0},
		{"prefix target keeps whole prefixes", pd(Targets{WarmPrefixes: 1}), m5large, 1, 47, 31},
		{"prefix mode warm ip", pd(Targets{WarmIPs: 1}), m5large, 0, 47, 46},
		{"prefix mode: the larger of warm ip and prefixes", pd(Targets{WarmIPs: 20, WarmPrefixes: 1}), m5large, 0, 47, 27},
		{"prefix mode without a target: nothing", pd(Targets{}), m5large, 0, 48, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Excess(tc.t, tc.l, tc.assigned, tc.free); got != tc.want {
				t.Errorf("Excess(%+v, %+v, %d assigned, %d free) = %d, want %d", tc.t, tc.l, tc.assigned, tc.free, got, tc.want)
			}
		})
	}
}

func TestStatsOf(t *testing.T) {
	got := StatsOf([]ENIView{
		secENI("eni-0", 0, "AACFR"),
		pdENI("eni-1", 1, 0, "A", "F", "RRRRRRRRRRRRRRRR", "FFFFFFFFFFFFFFFC"),
	})
	want := Stats{ENIs: 2, Total: 4 + 48, Assigned: 2 + 1, Cooling: 1 + 1, Releasing: 1 + 16, Prefixes: 3, FreePrefixes: 2}
	if got != want {
		t.Fatalf("StatsOf = %+v, want %+v", got, want)
	}
}

// TestGrowthIsNotExcess: whatever the pool holds, the addresses the warm
// targets ask for (Shortfall) are not excess once they arrive. Under a
// warm ENI target the pool grows by whole ENIs' worth; an excess of part
// of the ENI just filled would be proposed back minutes later and asked
// for again at the next pods.
func TestGrowthIsNotExcess(t *testing.T) {
	c5xlarge := Limits{MaxENIs: 4, IPv4PerENI: 15}
	for _, tg := range []Targets{{WarmENIs: 1}, {WarmENIs: 2}, {WarmIPs: 5}, {MinimumIPs: 20}, {WarmIPs: 3, MinimumIPs: 12}} {
		for _, l := range []Limits{m5large, c5xlarge} {
			capacity := Capacity(tg, l)
			for total := 0; total <= capacity; total++ {
				for assigned := 0; assigned <= total; assigned++ {
					need := Shortfall(tg, l, Stats{Total: total, Assigned: assigned})
					if need == 0 {
						continue
					}
					if ex := Excess(tg, l, assigned, total+need-assigned); ex != 0 {
						t.Fatalf("%+v on %+v: %d assigned of %d, the targets asked for %d more, and then call %d excess",
							tg, l, assigned, total, need, ex)
					}
				}
			}
		}
	}
}
