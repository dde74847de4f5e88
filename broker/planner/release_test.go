package planner

import (
	"fmt"
	"slices"
	"testing"
)

func addrRange(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s.%d", prefix, from+i)
	}
	return out
}

func concat(ls ...[]string) (out []string) {
	for _, l := range ls {
		out = append(out, l...)
	}
	return out
}

// TestChooseRelease: the agent states how many of its free addresses its
// warm targets do not need; the broker chooses which, from one ENI, never
// one a pod holds, never one not on the node's ENIs.
func TestChooseRelease(t *testing.T) {
	primary := HeldENI{ID: "eni-p", Primary: true, Addresses: addrRange("10.0.0", 10, 9)}
	second := HeldENI{ID: "eni-2", DeviceIndex: 1, Addresses: addrRange("10.0.1", 10, 9)}
	third := HeldENI{ID: "eni-3", DeviceIndex: 2, Addresses: addrRange("10.0.2", 10, 4)}
	pfx := HeldENI{ID: "eni-x", DeviceIndex: 1, Prefixes: []string{"10.1.0.0/28", "10.1.0.16/28", "10.1.0.32/28"}}
	sec := func(enis []HeldENI, assigned, free []string, excess, margin int) ReleaseInput {
		return ReleaseInput{Mode: SecondaryIP, ENIs: enis, Assigned: assigned, Free: free, Excess: excess, Margin: margin}
	}
	with := func(in ReleaseInput, f func(*ReleaseInput)) ReleaseInput { f(&in); return in }

	cases := []struct {
		name string
		in   ReleaseInput
		want Release
	}{
		{
			name: "no excess stated: nothing is given back",
			in:   sec([]HeldENI{primary, second}, nil, concat(primary.Addresses, second.Addresses), 0, 0),
		},
		{
			name: "within margin",
			in:   sec([]HeldENI{primary, second}, nil, concat(primary.Addresses, second.Addresses), 4, 4),
		},
		{
			name: "a node with pods waiting gives nothing back",
			in: with(sec([]HeldENI{primary, second}, nil, concat(primary.Addresses, second.Addresses), 9, 0),
				func(in *ReleaseInput) { in.Pending = 1 }),
		},
		{
			name: "a node short of its warm targets gives nothing back",
			in: with(sec([]HeldENI{primary, second}, nil, concat(primary.Addresses, second.Addresses), 9, 0),
				func(in *ReleaseInput) { in.WarmShortfall = 2 }),
		},
		{
			name: "prefers the ENI without pods, gives the excess only",
			// 17 free, 5 of them excess, from eni-2 which holds no pod
			in:   sec([]HeldENI{primary, second}, primary.Addresses[:1], concat(primary.Addresses[1:], second.Addresses), 5, 2),
			want: Release{ENIID: "eni-2", Addresses: second.Addresses[:5]},
		},
		{
			name: "an ENI that can be emptied goes first",
			in: sec([]HeldENI{primary, second, third}, second.Addresses[:1],
				concat(primary.Addresses, third.Addresses, second.Addresses[1:]), 19, 0),
			want: Release{ENIID: "eni-3", Addresses: third.Addresses},
		},
		{
			name: "never an address a pod holds, even if also reported free",
			// 9 reported free, 8 of them excess; 4 are also reported held and
			// come off it
			in:   sec([]HeldENI{second}, second.Addresses[:4], second.Addresses, 8, 0),
			want: Release{ENIID: "eni-2", Addresses: second.Addresses[4:8]},
		},
		{
			name: "addresses not reported are not proposed",
			in:   sec([]HeldENI{second}, nil, second.Addresses[:3], 2, 0),
			want: Release{ENIID: "eni-2", Addresses: second.Addresses[:2]},
		},
		{
			name: "free addresses no longer on an ENI do not count",
			// a stale report still lists eni-3's addresses, given back since:
			// 8 reported free, 5 excess, 4 of them gone
			in:   sec([]HeldENI{second}, nil, concat(second.Addresses[:4], third.Addresses), 5, 0),
			want: Release{ENIID: "eni-2", Addresses: second.Addresses[:1]},
		},
		{
			name: "a whole ENI's worth",
			in:   sec([]HeldENI{primary, second}, nil, concat(primary.Addresses, second.Addresses), 9, 0),
			want: Release{ENIID: "eni-2", Addresses: second.Addresses},
		},
		{
			name: "within the margin, an idle secondary ENI the excess covers goes whole",
			in:   sec([]HeldENI{primary, third}, primary.Addresses[:1], concat(primary.Addresses[1:], third.Addresses), 4, 4),
			want: Release{ENIID: "eni-3", Addresses: third.Addresses},
		},
		{
			name: "within the margin, an ENI a pod holds an address of stays",
			in:   sec([]HeldENI{primary, third}, third.Addresses[:1], concat(primary.Addresses, third.Addresses[1:]), 3, 4),
		},
		{
			name: "within the margin, an idle ENI larger than the excess stays",
			in:   sec([]HeldENI{primary, third}, nil, concat(primary.Addresses, third.Addresses), 3, 4),
		},
		{
			name: "within the margin, addresses of the primary ENI stay",
			in:   sec([]HeldENI{primary}, nil, primary.Addresses, 3, 4),
		},
		{
			name: "prefix mode: within the margin, an idle ENI of one free prefix goes whole",
			in: ReleaseInput{Mode: Prefix, ENIs: []HeldENI{{ID: "eni-y", DeviceIndex: 2, Prefixes: []string{"10.2.0.0/28"}}},
				Free: addrRange("10.2.0", 0, 16), Excess: 16, Margin: 20},
			want: Release{ENIID: "eni-y", Prefixes: []string{"10.2.0.0/28"}},
		},
		{
			name: "prefix mode gives back whole free prefixes only",
			// prefix 0 holds a pod; 1 and 2 are all free; 31 excess: one prefix
			in: ReleaseInput{Mode: Prefix, ENIs: []HeldENI{pfx}, Assigned: []string{"10.1.0.3"},
				Free: concat(addrRange("10.1.0", 0, 3), addrRange("10.1.0", 4, 44)), Excess: 31},
			want: Release{ENIID: "eni-x", Prefixes: []string{"10.1.0.16/28"}},
		},
		{
			name: "prefix mode: a prefix not wholly reported free stays",
			in:   ReleaseInput{Mode: Prefix, ENIs: []HeldENI{pfx}, Free: addrRange("10.1.0", 0, 47), Excess: 46}, // 10.1.0.47 missing
			want: Release{ENIID: "eni-x", Prefixes: []string{"10.1.0.0/28", "10.1.0.16/28"}},
		},
		{
			name: "prefix mode: less than a prefix of excess gives nothing",
			in:   ReleaseInput{Mode: Prefix, ENIs: []HeldENI{pfx}, Free: addrRange("10.1.0", 0, 48), Excess: 15},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ChooseRelease(tc.in)
			if got.ENIID != tc.want.ENIID || !slices.Equal(got.Addresses, tc.want.Addresses) || !slices.Equal(got.Prefixes, tc.want.Prefixes) {
				t.Errorf("ChooseRelease = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestCarryOut: only acknowledged addresses still on the ENI are taken,
// never one a pod holds, and only a secondary ENI whose every address the
// release covers, none held, is given up whole.
func TestCarryOut(t *testing.T) {
	second := HeldENI{ID: "eni-2", DeviceIndex: 1, PrimaryIP: "10.0.1.5", Addresses: addrRange("10.0.1", 10, 4)}
	pfx := HeldENI{ID: "eni-x", DeviceIndex: 1, PrimaryIP: "10.0.1.6", Prefixes: []string{"10.1.0.0/28", "10.1.0.16/28"}}
	primary := HeldENI{ID: "eni-p", Primary: true, PrimaryIP: "10.0.0.5", Addresses: addrRange("10.0.0", 10, 2)}
	cases := []struct {
		name        string
		addrs, pfxs []string
		eni         HeldENI
		assigned    []string
		want        Unassign
	}{
		{
			name:  "every address acknowledged: the ENI is given up whole",
			addrs: second.Addresses, eni: second,
			want: Unassign{Addresses: second.Addresses, Whole: true},
		},
		{
			name:  "one address of the ENI not acknowledged: the rest taken, the ENI stays",
			addrs: second.Addresses[1:], eni: second,
			want: Unassign{Addresses: second.Addresses[1:]},
		},
		{
			name:  "some acknowledged: taken, the ENI stays",
			addrs: second.Addresses[:2], eni: second,
			want: Unassign{Addresses: second.Addresses[:2]},
		},
		{
			name:  "an acknowledged address a pod holds is kept",
			addrs: second.Addresses, eni: second, assigned: second.Addresses[3:],
			want: Unassign{Addresses: second.Addresses[:3], Held: second.Addresses[3:]},
		},
		{
			name:  "an acknowledged address no longer on the ENI is left alone",
			addrs: concat(second.Addresses[:1], []string{"10.0.9.9"}), eni: second,
			want: Unassign{Addresses: second.Addresses[:1]},
		},
		{
			name:  "an ENI whose own address a pod holds is not given up",
			addrs: second.Addresses, eni: second, assigned: []string{second.PrimaryIP},
			want: Unassign{Addresses: second.Addresses},
		},
		{
			name:  "the primary ENI is never given up",
			addrs: primary.Addresses, eni: primary,
			want: Unassign{Addresses: primary.Addresses},
		},
		{
			name: "a prefix with a held address is kept",
			pfxs: pfx.Prefixes, eni: pfx, assigned: []string{"10.1.0.20"},
			want: Unassign{Prefixes: pfx.Prefixes[:1], Held: pfx.Prefixes[1:]},
		},
		{
			name: "whole free prefixes: the ENI is given up whole",
			pfxs: pfx.Prefixes, eni: pfx,
			want: Unassign{Prefixes: pfx.Prefixes, Whole: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CarryOut(tc.addrs, tc.pfxs, tc.eni, tc.assigned)
			if !slices.Equal(got.Addresses, tc.want.Addresses) || !slices.Equal(got.Prefixes, tc.want.Prefixes) ||
				!slices.Equal(got.Held, tc.want.Held) || got.Whole != tc.want.Whole {
				t.Errorf("CarryOut = %+v, want %+v", got, tc.want)
			}
		})
	}
}
