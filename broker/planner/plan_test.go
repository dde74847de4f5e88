package planner

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

var (
	c5xlarge   = Limits{MaxENIs: 4, IPv4PerENI: 15, PrefixCapable: true}
	m5x24large = Limits{MaxENIs: 15, IPv4PerENI: 50, PrefixCapable: true}
	xenSmall   = Limits{MaxENIs: 3, IPv4PerENI: 6} // not Nitro: no prefixes
)

func eni(id string, dev, secondary, prefixes int) ENI {
	return ENI{ID: id, DeviceIndex: dev, SubnetID: "subnet-a", Primary: dev == 0, Secondary: secondary, Prefixes: prefixes}
}

func node(id string, l Limits, enis ...ENI) Node {
	return Node{InstanceID: id, SubnetID: "subnet-a", SecurityGroups: []string{"sg-1"}, Mode: SecondaryIP, Limits: l, ENIs: enis}
}

func with(n Node, f func(*Node)) Node { f(&n); return n }

func assign(inst, eniID string, dev, count int, urgent bool) Action {
	return Action{Kind: Assign, InstanceID: inst, ENIID: eniID, SubnetID: "subnet-a", DeviceIndex: dev, Count: count, Mode: SecondaryIP, Urgent: urgent}
}

func create(inst string, dev, count int, urgent bool) Action {
	return Action{Kind: CreateAttach, InstanceID: inst, SubnetID: "subnet-a", SecurityGroups: []string{"sg-1"}, DeviceIndex: dev, Count: count, Mode: SecondaryIP, Urgent: urgent}
}

func prefix(a Action) Action { a.Mode = Prefix; return a }

func TestMake(t *testing.T) {
	plenty := Budgets{"subnet-a": 1000}
	tests := []struct {
		name    string
		nodes   []Node
		budgets Budgets
		want    []Action
		unmet   map[string]Shortfall
	}{
		{
			name:    "nothing asked, nothing planned",
			nodes:   []Node{node("i-1", c5xlarge, eni("eni-0", 0, 3, 0))},
			budgets: plenty,
		},
		{
			name:    "one assign fills the primary ENI",
			nodes:   []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 5, 0)), func(n *Node) { n.Pending = 6 })},
			budgets: plenty,
			want:    []Action{assign("i-1", "eni-0", 0, 6, true)},
		},
		{
			name: "most free ENI first, one assign per ENI",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 11, 0), eni("eni-1", 1, 5, 0)),
				func(n *Node) { n.Pending = 10 })},
			budgets: plenty,
			want:    []Action{assign("i-1", "eni-1", 1, 9, true), assign("i-1", "eni-0", 0, 1, true)},
		},
		{
			name: "new ENIs pre-filled at the lowest free device indexes",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 14, 0), eni("eni-2", 2, 14, 0)),
				func(n *Node) { n.Pending = 20 })},
			budgets: plenty,
			want:    []Action{create("i-1", 1, 14, true), create("i-1", 3, 6, true)},
		},
		{
			name: "FillNewENIs creates new ENIs full, existing ones get only the demand",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 10, 0)),
				func(n *Node) { n.Pending = 20; n.FillNewENIs = true })},
			budgets: plenty,
			want:    []Action{assign("i-1", "eni-0", 0, 4, true), create("i-1", 1, 14, true), create("i-1", 2, 14, true)},
		},
		{
			name: "FillNewENIs fills only from what the demands left of the budget",
			nodes: []Node{
				with(node("i-1", c5xlarge, eni("eni-0", 0, 14, 0)), func(n *Node) { n.Pending = 3; n.FillNewENIs = true }),
				with(node("i-2", c5xlarge, eni("eni-0b", 0, 14, 0)), func(n *Node) { n.Pending = 5 }),
			},
			// 4 + 6 for the two demands (each new ENI's own address too), 3 left to fill.
			budgets: Budgets{"subnet-a": 13},
			want:    []Action{create("i-2", 1, 5, true), create("i-1", 1, 6, true)},
		},
		{
			name: "FillNewENIs leaves prefix nodes alone",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 0, 14)),
				func(n *Node) { n.Mode = Prefix; n.Pending = 20; n.FillNewENIs = true })},
			budgets: plenty,
			want:    []Action{prefix(create("i-1", 1, 2, true))},
		},
		{
			name:    "device index 0 is the primary even when unlisted",
			nodes:   []Node{with(node("i-1", c5xlarge), func(n *Node) { n.Pending = 5 })},
			budgets: plenty,
			want:    []Action{create("i-1", 1, 5, true)},
		},
		{
			name: "node MaxENIs caps new ENIs",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 14, 0)),
				func(n *Node) { n.Pending = 20; n.MaxENIs = 2 })},
			budgets: plenty,
			want:    []Action{create("i-1", 1, 14, true)},
			unmet:   map[string]Shortfall{"i-1": {6, NodeFull}},
		},
		{
			name: "full node",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 14, 0), eni("eni-1", 1, 14, 0),
				eni("eni-2", 2, 14, 0), eni("eni-3", 3, 0, 14)), func(n *Node) { n.Pending = 3 })},
			budgets: plenty,
			unmet:   map[string]Shortfall{"i-1": {3, NodeFull}},
		},
		{
			name: "prefix mode: 46 addresses are 3 prefixes on the primary",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 0, 0)),
				func(n *Node) { n.Mode = Prefix; n.Pending = 46 })},
			budgets: plenty,
			want:    []Action{prefix(assign("i-1", "eni-0", 0, 3, true))},
		},
		{
			name: "prefix mode: a new ENI pre-filled with prefixes, budget exactly enough",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 0, 14)),
				func(n *Node) { n.Mode = Prefix; n.Pending = 40 })},
			budgets: Budgets{"subnet-a": 3*16 + 1},
			want:    []Action{prefix(create("i-1", 1, 3, true))},
		},
		{
			name: "prefix mode on a non-Nitro type falls back to secondary IPs",
			nodes: []Node{with(node("i-1", xenSmall, eni("eni-0", 0, 0, 0)),
				func(n *Node) { n.Mode = Prefix; n.Pending = 7 })},
			budgets: plenty,
			want:    []Action{assign("i-1", "eni-0", 0, 5, true), create("i-1", 1, 2, true)},
		},
		{
			name: "in-flight addresses cover waiting pods first",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 0, 0)),
				func(n *Node) { n.Pending = 10; n.WarmShortfall = 5; n.InFlight = 12 })},
			budgets: plenty,
			want:    []Action{assign("i-1", "eni-0", 0, 3, false)},
		},
		{
			name: "waiting and warm slots on one ENI share one assign",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 0, 0)),
				func(n *Node) { n.Pending = 2; n.WarmShortfall = 3 })},
			budgets: plenty,
			want:    []Action{assign("i-1", "eni-0", 0, 5, true)},
		},
		{
			name: "busy node gets assigns but no new ENI",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 10, 0)),
				func(n *Node) { n.Pending = 10; n.Busy = true })},
			budgets: plenty,
			want:    []Action{assign("i-1", "eni-0", 0, 4, true)},
			unmet:   map[string]Shortfall{"i-1": {6, NodeBusy}},
		},
		{
			name: "busy node without ENI room is full, not busy",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 14, 0)),
				func(n *Node) { n.Pending = 1; n.Busy = true; n.MaxENIs = 1 })},
			budgets: plenty,
			unmet:   map[string]Shortfall{"i-1": {1, NodeFull}},
		},
		{
			name: "budget shrinks a new ENI (its primary counts)",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 14, 0)),
				func(n *Node) { n.Pending = 14 })},
			budgets: Budgets{"subnet-a": 10},
			want:    []Action{create("i-1", 1, 9, true)},
			unmet:   map[string]Shortfall{"i-1": {5, BudgetExhausted}},
		},
		{
			name:    "a subnet missing from the budgets has no room",
			nodes:   []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 0, 0)), func(n *Node) { n.Pending = 3 })},
			budgets: Budgets{},
			unmet:   map[string]Shortfall{"i-1": {3, BudgetExhausted}},
		},
		{
			name: "a prefix never fits a budget below 16",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 0, 0)),
				func(n *Node) { n.Mode = Prefix; n.Pending = 1 })},
			budgets: Budgets{"subnet-a": 15},
			unmet:   map[string]Shortfall{"i-1": {1, BudgetExhausted}},
		},
		{
			name: "an existing ENI's subnet is out of budget: new ENI in the node's subnet",
			nodes: []Node{with(node("i-1", c5xlarge, ENI{ID: "eni-0", SubnetID: "subnet-x", Primary: true}),
				func(n *Node) { n.Pending = 3 })},
			budgets: Budgets{"subnet-a": 100, "subnet-x": 0},
			want:    []Action{create("i-1", 1, 3, true)},
		},
		{
			name: "waiting pods before warm targets",
			nodes: []Node{
				with(node("i-a", c5xlarge, eni("eni-a0", 0, 0, 0)), func(n *Node) { n.WarmShortfall = 10 }),
				with(node("i-b", c5xlarge, eni("eni-b0", 0, 0, 0)), func(n *Node) { n.Pending = 10 }),
			},
			budgets: Budgets{"subnet-a": 12},
			want:    []Action{assign("i-b", "eni-b0", 0, 10, true), assign("i-a", "eni-a0", 0, 2, false)},
			unmet:   map[string]Shortfall{"i-a": {8, BudgetExhausted}},
		},
		{
			name: "equal deficits share a short budget; the tie goes by instance ID",
			nodes: []Node{
				with(node("i-c", m5x24large, eni("eni-c0", 0, 0, 0)), func(n *Node) { n.Pending = 20 }),
				with(node("i-a", m5x24large, eni("eni-a0", 0, 0, 0)), func(n *Node) { n.Pending = 20 }),
				with(node("i-b", m5x24large, eni("eni-b0", 0, 0, 0)), func(n *Node) { n.Pending = 20 }),
			},
			budgets: Budgets{"subnet-a": 31},
			want: []Action{assign("i-a", "eni-a0", 0, 11, true), assign("i-b", "eni-b0", 0, 10, true),
				assign("i-c", "eni-c0", 0, 10, true)},
			unmet: map[string]Shortfall{"i-a": {9, BudgetExhausted}, "i-b": {10, BudgetExhausted},
				"i-c": {10, BudgetExhausted}},
		},
		{
			name: "the largest deficit is served first",
			nodes: []Node{
				with(node("i-a", m5x24large, eni("eni-a0", 0, 0, 0)), func(n *Node) { n.Pending = 4 }),
				with(node("i-b", m5x24large, eni("eni-b0", 0, 0, 0)), func(n *Node) { n.Pending = 20 }),
			},
			budgets: Budgets{"subnet-a": 10},
			want:    []Action{assign("i-b", "eni-b0", 0, 10, true)},
			unmet:   map[string]Shortfall{"i-a": {4, BudgetExhausted}, "i-b": {10, BudgetExhausted}},
		},
		{
			name: "budgets are per subnet",
			nodes: []Node{
				with(node("i-a", c5xlarge, eni("eni-a0", 0, 0, 0)), func(n *Node) { n.Pending = 5 }),
				with(node("i-b", c5xlarge, ENI{ID: "eni-b0", SubnetID: "subnet-b", Primary: true}),
					func(n *Node) { n.SubnetID = "subnet-b"; n.Pending = 5 }),
			},
			budgets: Budgets{"subnet-a": 100, "subnet-b": 2},
			want: []Action{assign("i-a", "eni-a0", 0, 5, true),
				{Kind: Assign, InstanceID: "i-b", ENIID: "eni-b0", SubnetID: "subnet-b", Count: 2, Mode: SecondaryIP, Urgent: true}},
			unmet: map[string]Shortfall{"i-b": {3, BudgetExhausted}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			budgets := Budgets{}
			for k, v := range tt.budgets {
				budgets[k] = v
			}
			got := Make(tt.nodes, tt.budgets)
			if !reflect.DeepEqual(got.Actions, tt.want) {
				t.Errorf("actions:\n got %s\nwant %s", fmtActions(got.Actions), fmtActions(tt.want))
			}
			unmet := tt.unmet
			if unmet == nil {
				unmet = map[string]Shortfall{}
			}
			if !reflect.DeepEqual(got.Unmet, unmet) {
				t.Errorf("unmet = %v, want %v", got.Unmet, unmet)
			}
			if !reflect.DeepEqual(budgets, tt.budgets) {
				t.Errorf("Make changed its budgets argument: %v -> %v", budgets, tt.budgets)
			}
		})
	}
}

func fmtActions(as []Action) string {
	if len(as) == 0 {
		return "[]"
	}
	var b strings.Builder
	for _, a := range as {
		fmt.Fprintf(&b, "\n  %s %s eni=%q subnet=%s dev=%d count=%d mode=%d urgent=%v sg=%v",
			a.Kind, a.InstanceID, a.ENIID, a.SubnetID, a.DeviceIndex, a.Count, a.Mode, a.Urgent, a.SecurityGroups)
	}
	return b.String()
}

func TestActionCost(t *testing.T) {
	tests := []struct {
		a         Action
		addrs     int
		cost      int64
		callCount int
	}{
		{Action{Kind: Assign, Count: 5, Mode: SecondaryIP}, 5, 5, 1},
		{Action{Kind: Assign, Count: 3, Mode: Prefix}, 48, 48, 1},
		{Action{Kind: CreateAttach, Count: 14, Mode: SecondaryIP}, 14, 15, 3},
		{Action{Kind: CreateAttach, Count: 2, Mode: Prefix}, 32, 33, 3},
	}
	for _, tt := range tests {
		if got := tt.a.Addresses(); got != tt.addrs {
			t.Errorf("%+v Addresses = %d, want %d", tt.a, got, tt.addrs)
		}
		if got := tt.a.Cost(); got != tt.cost {
			t.Errorf("%+v Cost = %d, want %d", tt.a, got, tt.cost)
		}
		if got := tt.a.Calls(); got != tt.callCount {
			t.Errorf("%+v Calls = %d, want %d", tt.a, got, tt.callCount)
		}
	}
}

func TestNames(t *testing.T) {
	for _, m := range []Mode{SecondaryIP, Prefix} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	if _, err := ParseMode("eni"); err == nil {
		t.Error("ParseMode accepted an unknown mode")
	}
	if NodeFull.String() != "node-full" || BudgetExhausted.String() != "budget-exhausted" || NodeBusy.String() != "node-busy" {
		t.Error("Reason names changed")
	}
}
