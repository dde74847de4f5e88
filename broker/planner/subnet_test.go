package planner

import (
	"reflect"
	"testing"
)

// newENISubnets returns the subnet of each CreateAttach of the plan for
// instance inst, by device index order of the plan.
func newENISubnets(p Plan, inst string) []string {
	var out []string
	for _, a := range p.Actions {
		if a.Kind == CreateAttach && a.InstanceID == inst {
			out = append(out, a.SubnetID)
		}
	}
	return out
}

func TestNewENISubnetByHeadroom(t *testing.T) {
	three := []string{"subnet-a", "subnet-b", "subnet-c"}
	full := func(id string, dev int) ENI {
		return ENI{ID: id, DeviceIndex: dev, SubnetID: "subnet-a", Primary: dev == 0, Secondary: 14}
	}
	tests := []struct {
		name    string
		node    Node
		budgets Budgets
		want    []string // subnets of the new ENIs, in plan order
		unmet   map[string]Shortfall
	}{
		{
			name: "one new ENI goes to the subnet with the most budget left",
			node: with(node("i-1", c5xlarge, full("eni-0", 0)), func(n *Node) {
				n.Subnets = three
				n.Pending = 10
			}),
			budgets: Budgets{"subnet-a": 100, "subnet-b": 300, "subnet-c": 200},
			want:    []string{"subnet-b"},
		},
		{
			name: "a node's new ENIs span the subnets as each takes budget",
			node: with(node("i-1", c5xlarge, full("eni-0", 0)), func(n *Node) {
				n.Subnets = three
				n.Pending = 42
			}),
			// 15 each (14 addresses and the ENI's own): b 110 -> 95, then
			// c 105 -> 90, then a 100.
			budgets: Budgets{"subnet-a": 100, "subnet-b": 110, "subnet-c": 105},
			want:    []string{"subnet-b", "subnet-c", "subnet-a"},
		},
		{
			name: "budget, not size: a subnet with no budget is passed over",
			node: with(node("i-1", c5xlarge, full("eni-0", 0)), func(n *Node) {
				n.Subnets = three
				n.Pending = 5
			}),
			budgets: Budgets{"subnet-a": 0, "subnet-b": 20, "subnet-c": 7},
			want:    []string{"subnet-b"},
		},
		{
			name: "equal budgets: the lowest subnet ID",
			node: with(node("i-1", c5xlarge, full("eni-0", 0)), func(n *Node) {
				n.Subnets = []string{"subnet-c", "subnet-b"}
				n.Pending = 5
			}),
			budgets: Budgets{"subnet-b": 50, "subnet-c": 50},
			want:    []string{"subnet-b"},
		},
		{
			name: "an ENI moves on when its subnet's budget runs out",
			node: with(node("i-1", c5xlarge, full("eni-0", 0)), func(n *Node) {
				n.Subnets = []string{"subnet-b", "subnet-c"}
				n.Pending = 20
			}),
			// b pays for its ENI and 9 addresses; c gets the other 11.
			budgets: Budgets{"subnet-b": 10, "subnet-c": 12},
			want:    []string{"subnet-c", "subnet-b"},
		},
		{
			name: "no candidate has budget: the demand is unmet for budget",
			node: with(node("i-1", c5xlarge, full("eni-0", 0)), func(n *Node) {
				n.Subnets = three
				n.Pending = 5
			}),
			budgets: Budgets{"subnet-a": 1, "subnet-b": 1},
			unmet:   map[string]Shortfall{"i-1": {5, BudgetExhausted}},
		},
		{
			name:    "no candidates: the node's own subnet",
			node:    with(node("i-1", c5xlarge, full("eni-0", 0)), func(n *Node) { n.Pending = 5 }),
			budgets: Budgets{"subnet-a": 10, "subnet-b": 500},
			want:    []string{"subnet-a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Make([]Node{tt.node}, tt.budgets)
			if got := newENISubnets(p, "i-1"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("new ENIs in %v, want %v%s", got, tt.want, fmtActions(p.Actions))
			}
			unmet := tt.unmet
			if unmet == nil {
				unmet = map[string]Shortfall{}
			}
			if !reflect.DeepEqual(p.Unmet, unmet) {
				t.Errorf("unmet = %v, want %v", p.Unmet, unmet)
			}
		})
	}
}

// Existing ENIs are filled before a new one is made, whatever subnet they
// are in, and a closed ENI is planned nothing but still takes its index.
func TestSubnetChoiceKeepsExistingENIs(t *testing.T) {
	n := with(node("i-1", c5xlarge,
		ENI{ID: "eni-0", DeviceIndex: 0, Primary: true, SubnetID: "subnet-a", Secondary: 14},
		ENI{ID: "eni-1", DeviceIndex: 1, SubnetID: "subnet-c", Secondary: 10},
		ENI{ID: "eni-2", DeviceIndex: 2, SubnetID: "subnet-b", Secondary: 2, Closed: true},
	), func(n *Node) {
		n.Subnets = []string{"subnet-a", "subnet-b", "subnet-c"}
		n.Pending = 8
	})
	p := Make([]Node{n}, Budgets{"subnet-a": 10, "subnet-b": 100, "subnet-c": 50})
	want := []Action{
		{Kind: Assign, InstanceID: "i-1", ENIID: "eni-1", SubnetID: "subnet-c", DeviceIndex: 1, Count: 4, Mode: SecondaryIP, Urgent: true},
		{Kind: CreateAttach, InstanceID: "i-1", SubnetID: "subnet-b", SecurityGroups: []string{"sg-1"}, DeviceIndex: 3, Count: 4, Mode: SecondaryIP, Urgent: true},
	}
	if !reflect.DeepEqual(p.Actions, want) {
		t.Errorf("actions:%s\nwant%s", fmtActions(p.Actions), fmtActions(want))
	}
}
