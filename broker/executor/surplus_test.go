package executor_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
)

func addrs(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s.%d", prefix, from+i)
	}
	return out
}

func TestSurplus(t *testing.T) {
	primary := store.ENI{ID: "eni-p", Primary: true, Status: store.ENIAttached, Addresses: addrs("10.0.0", 10, 9)}
	second := store.ENI{ID: "eni-2", DeviceIndex: 1, Status: store.ENIAttached, Addresses: addrs("10.0.1", 10, 9)}
	third := store.ENI{ID: "eni-3", DeviceIndex: 2, Status: store.ENIAttached, Addresses: addrs("10.0.2", 10, 4)}
	pfx := store.ENI{ID: "eni-x", DeviceIndex: 1, Status: store.ENIAttached, Prefixes: []string{"10.1.0.0/28", "10.1.0.16/28", "10.1.0.32/28"}}
	all := func(es ...store.ENI) (out []string) {
		for _, e := range es {
			out = append(out, e.Addresses...)
		}
		return out
	}
	usage := func(assigned []string, free []string) store.Usage {
		return store.Usage{Assigned: assigned, Free: free}
	}
	warmIP := func(n int) store.Node { return store.Node{Mode: "secondary-ip", WarmIPTarget: n, IPv4PerENI: 10} }

	cases := []struct {
		name   string
		node   store.Node
		enis   []store.ENI
		usage  store.Usage
		margin int
		want   executor.Proposal
	}{
		{
			name: "no warm target set: nothing is surplus",
			node: store.Node{Mode: "secondary-ip", IPv4PerENI: 10}, enis: []store.ENI{primary, second},
			usage: usage(nil, all(primary, second)), margin: 0,
		},
		{
			name: "within margin", node: warmIP(14), enis: []store.ENI{primary, second},
			usage: usage(nil, all(primary, second)), margin: 4, // 18 free, keep 14: 4 over
		},
		{
			name: "prefers the ENI without pods, gives the excess only", node: warmIP(12), enis: []store.ENI{primary, second},
			usage: usage(primary.Addresses[:1], append(primary.Addresses[1:], second.Addresses...)), margin: 2,
			// 17 free, keep 12: 5 surplus, from eni-2 which holds no pod
			want: executor.Proposal{ENIID: "eni-2", Addresses: second.Addresses[:5]},
		},
		{
			name: "an ENI that can be emptied goes first", node: warmIP(2), enis: []store.ENI{primary, second, third},
			usage: usage(second.Addresses[:1], append(all(primary, third), second.Addresses[1:]...)), margin: 0,
			want: executor.Proposal{ENIID: "eni-3", Addresses: third.Addresses},
		},
		{
			name: "never an address a pod holds, even if also reported free", node: warmIP(1), enis: []store.ENI{second},
			usage: usage(second.Addresses[:4], second.Addresses), margin: 0,
			// 5 free and not held, keep 1: 4 surplus, none of the held ones
			want: executor.Proposal{ENIID: "eni-2", Addresses: second.Addresses[4:8]},
		},
		{
			name: "minimum IP target counts held addresses", node: store.Node{Mode: "secondary-ip", MinimumIPTarget: 10},
			enis: []store.ENI{second}, usage: usage(second.Addresses[:8], second.Addresses), margin: 0,
			// 8 held, 1 free; minimum 10 wants 2 free: nothing surplus
		},
		{
			name: "addresses not reported are not proposed", node: warmIP(1), enis: []store.ENI{second},
			usage: usage(nil, second.Addresses[:3]), margin: 0,
			want: executor.Proposal{ENIID: "eni-2", Addresses: second.Addresses[:2]},
		},
		{
			name: "free addresses no longer on an ENI do not count", node: warmIP(3), enis: []store.ENI{second},
			// a stale report still lists eni-3's addresses, given back since
			usage: usage(nil, append(slices.Clone(second.Addresses[:4]), third.Addresses...)), margin: 0,
			want: executor.Proposal{ENIID: "eni-2", Addresses: second.Addresses[:1]},
		},
		{
			name: "warm ENI target keeps one ENI's worth", node: store.Node{Mode: "secondary-ip", WarmENITarget: 1, IPv4PerENI: 10},
			enis: []store.ENI{primary, second}, usage: usage(nil, all(primary, second)), margin: 0,
			want: executor.Proposal{ENIID: "eni-2", Addresses: second.Addresses},
		},
		{
			name: "prefix mode gives back whole free prefixes only", node: store.Node{Mode: "prefix", WarmPrefixTarget: 1},
			enis: []store.ENI{pfx},
			// prefix 0 holds a pod; 1 and 2 are all free: keep one prefix
			usage: usage([]string{"10.1.0.3"}, append(addrs("10.1.0", 0, 3), addrs("10.1.0", 4, 44)...)), margin: 0,
			want: executor.Proposal{ENIID: "eni-x", Prefixes: []string{"10.1.0.16/28"}},
		},
		{
			name: "prefix mode: a prefix not wholly reported free stays", node: store.Node{Mode: "prefix", WarmPrefixTarget: 0, WarmIPTarget: 1},
			enis:  []store.ENI{pfx},
			usage: usage(nil, addrs("10.1.0", 0, 47)), // 10.1.0.47 missing from the report
			want:  executor.Proposal{ENIID: "eni-x", Prefixes: []string{"10.1.0.0/28", "10.1.0.16/28"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := executor.Surplus(tc.node, tc.enis, tc.usage, tc.margin)
			if got.ENIID != tc.want.ENIID || !slices.Equal(got.Addresses, tc.want.Addresses) || !slices.Equal(got.Prefixes, tc.want.Prefixes) {
				t.Errorf("Surplus = %+v, want %+v", got, tc.want)
			}
		})
	}
}
