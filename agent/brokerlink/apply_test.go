package brokerlink

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/pool"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// TestDiffSnapshot: what a broker snapshot asks of the pool, computed
// without touching it.
func TestDiffSnapshot(t *testing.T) {
	a := netip.MustParseAddr
	pfx := netip.MustParsePrefix
	view := func(id string, primary bool, addrs ...string) pool.ENIView {
		v := pool.ENIView{ID: id, Primary: primary}
		for _, s := range addrs {
			v.Addrs = append(v.Addrs, pool.AddrView{Addr: a(s), State: checkpoint.Free})
		}
		return v
	}
	primary := &allotv1.ENI{EniId: "eni-p", Mac: "02:00:00:00:00:01", Primary: true, Addresses: []string{"10.0.0.10", "10.0.0.11"}}
	cases := []struct {
		name  string
		enis  []*allotv1.ENI
		view  []pool.ENIView
		await []Delivery
		keep  map[string][]netip.Addr
		rm    []string
		known int
	}{
		{
			name: "what the pool lacks is awaited, what it has is kept",
			enis: []*allotv1.ENI{primary},
			view: []pool.ENIView{view("eni-p", true, "10.0.0.10")},
			await: []Delivery{{ENIID: "eni-p", MAC: "02:00:00:00:00:01",
				Addrs: []netip.Addr{a("10.0.0.11")}}},
			keep:  map[string][]netip.Addr{"eni-p": {a("10.0.0.10"), a("10.0.0.11")}},
			known: 2,
		},
		{
			name: "an unlisted secondary ENI is removed, never the primary",
			enis: nil,
			view: []pool.ENIView{view("eni-p", true, "10.0.0.10"), view("eni-2", false, "10.0.1.10")},
			keep: map[string][]netip.Addr{"eni-p": nil, "eni-2": nil},
			rm:   []string{"eni-2"},
		},
		{
			name: "a new ENI is awaited whole, with its prefix counted 16",
			enis: []*allotv1.ENI{{EniId: "eni-3", Mac: "02:00:00:00:00:03", DeviceIndex: 2, Prefixes: []string{"10.0.2.0/28"}}},
			await: []Delivery{{ENIID: "eni-3", MAC: "02:00:00:00:00:03", DeviceIndex: 2,
				Prefixes: []netip.Prefix{pfx("10.0.2.0/28")}}},
			keep:  map[string][]netip.Addr{},
			known: 16,
		},
		{
			name: "malformed values and nameless ENIs are ignored and not counted",
			enis: []*allotv1.ENI{
				{EniId: "eni-4", Mac: "02:00:00:00:00:04", Addresses: []string{"10.0.3.1", "nope"}, Prefixes: []string{"10.0.4.0/24"}},
				{EniId: "eni-5", Addresses: []string{"10.0.5.1"}},
			},
			await: []Delivery{{ENIID: "eni-4", MAC: "02:00:00:00:00:04", Addrs: []netip.Addr{a("10.0.3.1")}}},
			keep:  map[string][]netip.Addr{},
			known: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := diffSnapshot(tc.enis, tc.view)
			if !reflect.DeepEqual(d.await, tc.await) {
				t.Errorf("await %+v, want %+v", d.await, tc.await)
			}
			keep := map[string][]netip.Addr{}
			for id, b := range d.keep {
				keep[id] = b.addrs
			}
			if !reflect.DeepEqual(keep, tc.keep) {
				t.Errorf("keep %v, want %v", keep, tc.keep)
			}
			if !slices.Equal(d.remove, tc.rm) || d.known != tc.known {
				t.Errorf("remove %v known %d, want %v and %d", d.remove, d.known, tc.rm, tc.known)
			}
		})
	}
}
