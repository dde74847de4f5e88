package planner

import (
	"reflect"
	"testing"
)

func TestMakeNaive(t *testing.T) {
	plenty := Budgets{"subnet-a": 1000}
	naive := Options{Policy: Naive}
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
			name: "first fit by device index, not the most free ENI",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 11, 0), eni("eni-1", 1, 5, 0)),
				func(n *Node) { n.Pending = 10 })},
			budgets: plenty,
			want:    []Action{assign("i-1", "eni-0", 0, 3, true), assign("i-1", "eni-1", 1, 7, true)},
		},
		{
			name:    "a full node's ENIs get one new ENI, created empty; the rest waits for it",
			nodes:   []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 1, 0)), func(n *Node) { n.Pending = 46 })},
			budgets: plenty,
			want:    []Action{assign("i-1", "eni-0", 0, 13, true), create("i-1", 1, 0, true)},
			unmet:   map[string]Shortfall{"i-1": {Addresses: 33, Reason: NodeBusy}},
		},
		{
			name: "prefixes: one assign on the primary, as fewest-calls",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 0, 1)),
				func(n *Node) { n.Mode = Prefix; n.Pending = 46 })},
			budgets: plenty,
			want:    []Action{prefix(assign("i-1", "eni-0", 0, 3, true))},
		},
		{
			name: "a busy node gets no new ENI",
			nodes: []Node{with(node("i-1", c5xlarge, eni("eni-0", 0, 14, 0)),
				func(n *Node) { n.Pending = 5; n.Busy = true })},
			budgets: plenty,
			unmet:   map[string]Shortfall{"i-1": {Addresses: 5, Reason: NodeBusy}},
		},
		{
			name: "a short budget goes to the first nodes, not evened out",
			nodes: []Node{
				with(node("i-2", c5xlarge, eni("eni-2", 0, 1, 0)), func(n *Node) { n.Pending = 10 }),
				with(node("i-1", c5xlarge, eni("eni-1", 0, 1, 0)), func(n *Node) { n.Pending = 10 }),
			},
			budgets: Budgets{"subnet-a": 12},
			want:    []Action{assign("i-1", "eni-1", 0, 10, true), assign("i-2", "eni-2", 0, 2, true)},
			unmet:   map[string]Shortfall{"i-2": {Addresses: 8, Reason: BudgetExhausted}},
		},
		{
			name: "warm targets after every waiting pod",
			nodes: []Node{
				with(node("i-1", c5xlarge, eni("eni-1", 0, 1, 0)), func(n *Node) { n.WarmShortfall = 4 }),
				with(node("i-2", c5xlarge, eni("eni-2", 0, 1, 0)), func(n *Node) { n.Pending = 2 }),
			},
			budgets: plenty,
			want:    []Action{assign("i-2", "eni-2", 0, 2, true), assign("i-1", "eni-1", 0, 4, false)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.budgets["subnet-a"]
			got := MakeWith(tt.nodes, tt.budgets, naive)
			if !reflect.DeepEqual(got.Actions, tt.want) {
				t.Errorf("actions:\n got %+v\nwant %+v", got.Actions, tt.want)
			}
			if len(got.Unmet) != len(tt.unmet) || len(tt.unmet) > 0 && !reflect.DeepEqual(got.Unmet, tt.unmet) {
				t.Errorf("unmet: got %+v, want %+v", got.Unmet, tt.unmet)
			}
			if tt.budgets["subnet-a"] != before {
				t.Errorf("MakeWith changed the budgets it was given")
			}
		})
	}
}

func TestParseNaive(t *testing.T) {
	p, err := ParsePolicy("naive")
	if err != nil || p != Naive || p.String() != "naive" {
		t.Errorf(`ParsePolicy("naive") = %v, %v; want naive`, p, err)
	}
}
