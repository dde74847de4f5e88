package executor

import (
	"reflect"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/planner"
)

// TestPickEarly: the demands with pods waiting that have stood still
// longest are taken first, each in the shape that leaves the most of both
// kinds to spend; warm-only and not yet still demands are left to their
// gather, the latter with a wake for when they will be still.
func TestPickEarly(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	still := 250 * time.Millisecond
	c5 := planner.Limits{MaxENIs: 4, IPv4PerENI: 15, PrefixCapable: true}
	node := func(id string, mode planner.Mode, pending, warm int, age time.Duration) gathered {
		return gathered{
			pn: planner.Node{InstanceID: id, SubnetID: "subnet-a", Mode: mode, Limits: c5, Pending: pending, WarmShortfall: warm,
				ENIs: []planner.ENI{{ID: "eni-" + id, SubnetID: "subnet-a", Primary: true}}},
			updated: now.Add(-age), settles: time.Second - age,
		}
	}
	prefix := func(id string, age time.Duration) gathered { return node(id, planner.Prefix, 30, 16, age) }
	held := []gathered{
		prefix("i-5", 300*time.Millisecond),
		prefix("i-1", 600*time.Millisecond),
		node("i-0", planner.Prefix, 0, 16, 900*time.Millisecond), // warm only
		prefix("i-3", 600*time.Millisecond),
		prefix("i-4", 100*time.Millisecond), // still in 150 ms
		prefix("i-2", 700*time.Millisecond),
		prefix("i-6", 200*time.Millisecond), // still in 50 ms
	}
	tests := []struct {
		name   string
		spend  planner.Shape
		policy planner.Policy
		want   map[string]planner.Shape
		wake   time.Duration
	}{
		{"both kinds, alternating", planner.Shape{Assigns: 2, Creates: 2}, planner.TimeOptimal,
			map[string]planner.Shape{"i-2": {Assigns: 1}, "i-1": {Creates: 1}, "i-3": {Assigns: 1}, "i-5": {Creates: 1}}, 0},
		{"assigns only", planner.Shape{Assigns: 2}, planner.TimeOptimal,
			map[string]planner.Shape{"i-2": {Assigns: 1}, "i-1": {Assigns: 1}}, 0},
		{"new ENIs only", planner.Shape{Creates: 1}, planner.TimeOptimal,
			map[string]planner.Shape{"i-2": {Creates: 1}}, 0},
		// Fewest calls takes only a node's first shape: no new ENI where
		// its primary ENI has room.
		{"fewest calls, new ENIs only", planner.Shape{Creates: 3}, planner.FewestCalls,
			map[string]planner.Shape{}, 50 * time.Millisecond},
		{"more than the still ones", planner.Shape{Assigns: 9, Creates: 9}, planner.TimeOptimal,
			map[string]planner.Shape{"i-2": {Assigns: 1}, "i-1": {Creates: 1}, "i-3": {Assigns: 1}, "i-5": {Creates: 1}}, 50 * time.Millisecond},
	}
	for _, tt := range tests {
		nodes, shapes, wake := pickEarly(held, tt.spend, now, still, tt.policy)
		if !reflect.DeepEqual(shapes, tt.want) {
			t.Errorf("%s: shapes %v, want %v", tt.name, shapes, tt.want)
		}
		if len(nodes) != len(tt.want) {
			t.Errorf("%s: %d nodes for %d shapes", tt.name, len(nodes), len(tt.want))
		}
		if wake != tt.wake {
			t.Errorf("%s: wake %v, want %v", tt.name, wake, tt.wake)
		}
	}

	// With secondary IPs 46 addresses take the primary's Assign and three
	// new ENIs, whatever the plan: taken only when both kinds are there.
	sec := []gathered{node("i-7", planner.SecondaryIP, 46, 0, time.Second)}
	if nodes, _, _ := pickEarly(sec, planner.Shape{Assigns: 5, Creates: 2}, now, still, planner.TimeOptimal); len(nodes) != 0 {
		t.Errorf("secondary node taken with two new ENIs to spend: %v", nodes)
	}
	if _, shapes, _ := pickEarly(sec, planner.Shape{Assigns: 1, Creates: 3}, now, still, planner.TimeOptimal); shapes["i-7"] != (planner.Shape{Assigns: 1, Creates: 3}) {
		t.Errorf("secondary node: shapes %v, want one Assign and three new ENIs", shapes)
	}
}

// TestAnyChoice: a prefix node that one Assign or one new ENI serves has a
// choice; a node that needs its primary's Assign and three new ENIs has
// none.
func TestAnyChoice(t *testing.T) {
	c5 := planner.Limits{MaxENIs: 4, IPv4PerENI: 15, PrefixCapable: true}
	node := func(mode planner.Mode) planner.Node {
		return planner.Node{InstanceID: "i-1", SubnetID: "subnet-a", Mode: mode, Limits: c5, Pending: 46,
			ENIs: []planner.ENI{{ID: "eni-1", SubnetID: "subnet-a", Primary: true}}}
	}
	if !anyChoice([]planner.Node{node(planner.SecondaryIP), node(planner.Prefix)}, nil) {
		t.Error("a prefix node: no choice")
	}
	if anyChoice([]planner.Node{node(planner.SecondaryIP)}, nil) {
		t.Error("a secondary-IP node needing all four ENIs: a choice")
	}
}
