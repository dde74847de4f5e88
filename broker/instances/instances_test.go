package instances

import (
	"testing"

	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
)

func TestUsableAddresses(t *testing.T) {
	for _, tc := range []struct {
		cidr string
		want int64
		bad  bool
	}{
		{cidr: "10.0.0.0/24", want: 251},
		{cidr: "10.0.0.0/17", want: 32763},
		{cidr: "10.0.0.0/29", want: 3},
		{cidr: "10.0.0.0/31", want: 0},
		{cidr: "fd00::/64", bad: true},
		{cidr: "nonsense", bad: true},
	} {
		got, err := usableAddresses(tc.cidr)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("usableAddresses(%q) = %d, %v; want %d, bad %v", tc.cidr, got, err, tc.want, tc.bad)
		}
	}
}

// TestLimits: a described type wins; without one, a secondary-IP node's
// own record serves, a prefix node's does not (it needs to know Nitro).
func TestLimits(t *testing.T) {
	m := New(nil, nil, 0)
	m.types["c5.xlarge"] = planner.Limits{MaxENIs: 4, IPv4PerENI: 15, PrefixCapable: true}
	for _, tc := range []struct {
		n    store.Node
		want planner.Limits
		ok   bool
	}{
		{store.Node{InstanceType: "c5.xlarge", MaxENIs: 2, IPv4PerENI: 3}, planner.Limits{MaxENIs: 4, IPv4PerENI: 15, PrefixCapable: true}, true},
		{store.Node{InstanceType: "t2.medium", MaxENIs: 3, IPv4PerENI: 6}, planner.Limits{MaxENIs: 3, IPv4PerENI: 6}, true},
		{store.Node{InstanceType: "t2.medium", MaxENIs: 3, IPv4PerENI: 6, Mode: "prefix"}, planner.Limits{}, false},
		{store.Node{InstanceType: "t2.medium"}, planner.Limits{}, false},
	} {
		got, ok := m.Limits(tc.n)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Limits(%+v) = %+v, %v; want %+v, %v", tc.n, got, ok, tc.want, tc.ok)
		}
	}
}
