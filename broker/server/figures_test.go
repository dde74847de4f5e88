package server

import (
	"fmt"
	"testing"

	"github.com/allotnet/allot/broker/store"
)

func addrs(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s.%d", prefix, from+i)
	}
	return out
}

const (
	subA = "subnet-0000000a"
	subB = "subnet-0000000b"
)

var (
	m5large = store.Node{InstanceID: "i-00000001", SubnetID: subA, Mode: store.ModeSecondaryIP, MaxENIs: 3, IPv4PerENI: 10}
	c5xl    = store.Node{InstanceID: "i-00000002", SubnetID: subA, Mode: store.ModePrefix, MaxENIs: 4, IPv4PerENI: 15}
	other   = store.Node{InstanceID: "i-00000003", SubnetID: subB, Mode: store.ModeSecondaryIP, MaxENIs: 3, IPv4PerENI: 10}
)

func TestFigures(t *testing.T) {
	// A /24: 256 - 5 = 251 usable.
	base := store.Subnet{ID: subA, CIDR: "10.0.1.0/24", AvailabilityZone: "us-east-1a", Usable: 251}
	with := func(f func(*store.Subnet)) store.Subnet { s := base; f(&s); return s }

	m5Primary := store.ENI{ID: "eni-00000001", InstanceID: m5large.InstanceID, SubnetID: subA, Primary: true,
		PrimaryIP: "10.0.1.4", Status: store.ENIAttached}
	m5Second := store.ENI{ID: "eni-00000002", InstanceID: m5large.InstanceID, SubnetID: subA, DeviceIndex: 1,
		PrimaryIP: "10.0.1.10", Addresses: addrs("10.0.1", 11, 9), Status: store.ENIAttached}
	c5Second := store.ENI{ID: "eni-00000003", InstanceID: c5xl.InstanceID, SubnetID: subA, DeviceIndex: 1,
		PrimaryIP: "10.0.1.30", Prefixes: []string{"10.0.1.64/28", "10.0.1.80/28"}, Status: store.ENIAttached}
	detached := store.ENI{ID: "eni-00000004", InstanceID: m5large.InstanceID, SubnetID: subA, DeviceIndex: 2,
		Addresses: addrs("10.0.1", 100, 9), Status: store.ENIDetached}
	elsewhere := store.ENI{ID: "eni-00000005", InstanceID: other.InstanceID, SubnetID: subB, DeviceIndex: 1,
		Addresses: addrs("10.0.2", 11, 9), Status: store.ENIAttached}

	m5Usage := store.Usage{InstanceID: m5large.InstanceID,
		Assigned: addrs("10.0.1", 11, 5),
		// 10.0.1.99 is on no ENI of the node: reported but not counted.
		Free: append(addrs("10.0.1", 16, 4), "10.0.1.99")}
	c5Usage := store.Usage{InstanceID: c5xl.InstanceID,
		Assigned: addrs("10.0.1", 64, 3), Free: addrs("10.0.1", 67, 29)}
	otherUsage := store.Usage{InstanceID: other.InstanceID, Assigned: addrs("10.0.2", 11, 9)}

	for _, tc := range []struct {
		name  string
		sn    store.Subnet
		nodes []store.Node
		enis  []store.ENI
		usage []store.Usage
		// want: limit, attached, assigned, warm, reserved, available, headroom_pods
		want [7]int64
	}{
		{
			name: "empty subnet, no nodes: primaries unknown, available counts in full",
			sn:   base,
			want: [7]int64{251, 0, 0, 0, 0, 251, 251},
		},
		{
			name: "headroom and others lower the limit; cap lower still wins",
			sn:   with(func(s *store.Subnet) { s.Headroom, s.UsedByOthers, s.Cap = 20, 31, 150 }),
			want: [7]int64{150, 0, 0, 0, 0, 150, 150},
		},
		{
			name: "others and headroom exceed usable: limit zero, never negative",
			sn:   with(func(s *store.Subnet) { s.Headroom, s.UsedByOthers, s.Attached = 200, 100, 10 }),
			want: [7]int64{0, 10, 0, 0, 0, 0, 0},
		},
		{
			// available 241; 9 free slots on the primary ENI take 9 without
			// a new primary; 232 left buy 23 new ENIs of 10 (207 pods) and
			// a 24th with 2 addresses (1 pod).
			name:  "secondary-IP node: spare slots first, then ENIs of 1 primary + 9",
			sn:    with(func(s *store.Subnet) { s.Attached = 10 }),
			nodes: []store.Node{m5large, other},
			enis:  []store.ENI{m5Primary, m5Second, detached, elsewhere},
			usage: []store.Usage{m5Usage, otherUsage},
			want:  [7]int64{251, 10, 5, 4, 0, 241, 4 + 9 + 207 + 1},
		},
		{
			name:  "reservations in flight reduce available",
			sn:    with(func(s *store.Subnet) { s.Attached, s.Reserved = 10, 41 }),
			nodes: []store.Node{m5large},
			enis:  []store.ENI{m5Primary, m5Second},
			usage: []store.Usage{m5Usage},
			// available 200: 9 spare, 191 = 19 ENIs (171 pods) + 1 left (none).
			want: [7]int64{251, 10, 5, 4, 41, 200, 4 + 9 + 171},
		},
		{
			// Prefix node alone: available 251-33 = 218. Its ENI has 12 free
			// slots; 13 prefixes would fit the budget but only 12 slots are
			// free: 192. The 26 left make one new ENI with one prefix
			// (1 + 16 addresses): 16 pods.
			name:  "prefix node: /28 slots, then new ENIs",
			sn:    with(func(s *store.Subnet) { s.Attached = 33 }),
			nodes: []store.Node{c5xl},
			enis:  []store.ENI{c5Second},
			usage: []store.Usage{c5Usage},
			want:  [7]int64{251, 33, 3, 29, 0, 218, 29 + 192 + 16},
		},
		{
			// Mixed: the template is the smaller yield (m5: 9 per ENI).
			// available 251-43 = 208: 9 secondary slots, then 199/16 = 12
			// prefixes (192), 7 left: no full ENI of 10, 7 addresses make
			// one ENI with 6 pods.
			name:  "mixed modes share the subnet",
			sn:    with(func(s *store.Subnet) { s.Attached = 43 }),
			nodes: []store.Node{m5large, c5xl},
			enis:  []store.ENI{m5Primary, m5Second, c5Second},
			usage: []store.Usage{m5Usage, c5Usage},
			want:  [7]int64{251, 43, 8, 33, 0, 208, 33 + 9 + 192 + 6},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			usage := map[string]store.Usage{}
			for _, u := range tc.usage {
				usage[u.InstanceID] = u
			}
			b := Figures(tc.sn, tc.nodes, tc.enis, usage, nil)
			got := [7]int64{b.Limit, b.Attached, b.Assigned, b.Warm, b.Reserved, b.Available, b.HeadroomPods}
			if got != tc.want {
				t.Errorf("limit, attached, assigned, warm, reserved, available, headroom_pods\n got %v\nwant %v", got, tc.want)
			}
			if b.SubnetId != tc.sn.ID || b.Cidr != tc.sn.CIDR || b.Usable != tc.sn.Usable ||
				b.Headroom != tc.sn.Headroom || b.Cap != tc.sn.Cap || b.UsedByOthers != tc.sn.UsedByOthers {
				t.Errorf("record fields not carried over: %v", b)
			}
		})
	}
}

func TestMaxAddresses(t *testing.T) {
	for _, tc := range []struct {
		n    store.Node
		want int64
	}{
		{m5large, 3 * 9},
		{c5xl, 4 * 14 * 16},
		{store.Node{Mode: store.ModeSecondaryIP}, 0},
	} {
		if got := maxAddresses(tc.n); got != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.n.InstanceID, tc.n.Mode, got, tc.want)
		}
	}
}
