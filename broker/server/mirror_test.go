package server

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/store"
)

func TestMirrorMarksOnlyTouchedNodes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := newMirror()
	m.reset(&store.Records{
		Rev:     10,
		Subnets: []store.Subnet{{ID: "subnet-a", CIDR: "10.0.1.0/24"}, {ID: "subnet-b", CIDR: "10.0.2.0/24"}},
		Nodes:   []store.Node{{InstanceID: "i-1", MaxENIs: 3}, {InstanceID: "i-2"}, {InstanceID: "i-3"}},
		ENIs: []store.ENI{
			{ID: "eni-1", InstanceID: "i-1", SubnetID: "subnet-a", Addresses: []string{"10.0.1.11"}},
			{ID: "eni-2", InstanceID: "i-2", SubnetID: "subnet-b"},
		},
		Releases: []store.Release{{ID: "rel-1", InstanceID: "i-3", State: store.ReleaseDone, CreatedAt: t0}},
	})
	if got := sortedKeys(m.dirty); !slices.Equal(got, []string{"i-1", "i-2", "i-3"}) {
		t.Fatalf("dirty after a full read %v", got)
	}
	for _, tc := range []struct {
		name   string
		change store.Change
		dirty  []string
	}{
		{"subnet counters", store.Change{Kind: store.RecordSubnet, ID: "subnet-a",
			Record: store.Subnet{ID: "subnet-a", CIDR: "10.0.1.0/24", Reserved: 5}}, nil},
		{"subnet cidr", store.Change{Kind: store.RecordSubnet, ID: "subnet-b",
			Record: store.Subnet{ID: "subnet-b", CIDR: "10.0.2.0/23"}}, []string{"i-2"}},
		{"usage", store.Change{Kind: store.RecordUsage, ID: "i-1",
			Record: store.Usage{InstanceID: "i-1", Seq: 1}}, nil},
		{"eni moves", store.Change{Kind: store.RecordENI, ID: "eni-1",
			Record: store.ENI{ID: "eni-1", InstanceID: "i-3", SubnetID: "subnet-a"}}, []string{"i-1", "i-3"}},
		{"eni deleted", store.Change{Kind: store.RecordENI, ID: "eni-2", Deleted: true}, []string{"i-2"}},
		{"release proposed", store.Change{Kind: store.RecordRelease, ID: "rel-2",
			Record: store.Release{ID: "rel-2", InstanceID: "i-1", State: store.ReleaseProposed, CreatedAt: t0}}, []string{"i-1"}},
		{"status", store.Change{Kind: store.RecordStatus, ID: "i-2",
			Record: store.NodeStatus{InstanceID: "i-2", Reason: store.UnmetBudget}}, []string{"i-2"}},
		{"node deleted", store.Change{Kind: store.RecordNode, ID: "i-2", Deleted: true}, []string{"i-2"}},
	} {
		clear(m.dirty)
		m.apply(tc.change)
		if got := sortedKeys(m.dirty); !slices.Equal(got, tc.dirty) {
			t.Errorf("%s: dirty %v, want %v", tc.name, got, tc.dirty)
		}
	}

	// The states are what the store's listings would give.
	if ns := m.state("i-1"); !ns.registered || len(ns.enis) != 0 || len(ns.ev.GetReleases()) != 1 || ns.ev.GetMaxEnis() != 3 {
		t.Fatalf("i-1 %+v", ns)
	}
	if ns := m.state("i-3"); len(ns.ev.GetEnis()) != 1 || ns.ev.GetEnis()[0].GetSubnetCidr() != "10.0.1.0/24" ||
		len(ns.ev.GetReleases()) != 0 {
		t.Fatalf("i-3 %+v (a done release is not open)", ns)
	}
	if ns := m.state("i-2"); ns == nil || ns.registered || ns.ev.GetUnmet().GetReason() != store.UnmetBudget {
		t.Fatalf("i-2 %+v (deleted, its status remains)", ns)
	}
	if ns := m.state("i-9"); ns != nil {
		t.Fatalf("unknown node %+v", ns)
	}
	v := m.flat()
	if len(v.nodes) != 2 || len(v.enis) != 1 || len(v.releases) != 2 || v.usage["i-1"].Seq != 1 || len(v.enisBy["i-3"]) != 1 {
		t.Fatalf("flat view %+v", v)
	}
}

func sortedKeys(m map[string]bool) []string {
	out := slices.Sorted(maps.Keys(m))
	if len(out) == 0 {
		return nil
	}
	return out
}
