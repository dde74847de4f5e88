package planner

import (
	"fmt"
	"testing"
)

// burst500 is the 500-node burst: 500 c5.xlarge nodes, each with only its
// primary ENI, 46 pods waiting at once, in one large subnet.
func burst500(mode Mode) []Node {
	nodes := make([]Node, 500)
	for i := range nodes {
		nodes[i] = Node{
			InstanceID:     fmt.Sprintf("i-%04d", i),
			SubnetID:       "subnet-big",
			SecurityGroups: []string{"sg-1"},
			Mode:           mode,
			Limits:         c5xlarge,
			ENIs:           []ENI{{ID: fmt.Sprintf("eni-%04d", i), SubnetID: "subnet-big", Primary: true}},
			Pending:        46,
		}
	}
	return nodes
}

// TestBurst500ShortBudget: when the subnet can't hold the burst, every node
// ends within a couple of addresses of every other (a new ENI's first
// address also pays for its primary), and nothing exceeds the budget.
func TestBurst500ShortBudget(t *testing.T) {
	nodes := burst500(SecondaryIP)
	budgets := Budgets{"subnet-big": 20000}
	plan := Make(nodes, budgets)
	if err := checkPlan(nodes, budgets, plan); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, a := range plan.Actions {
		got[a.InstanceID] += a.Addresses()
	}
	lo, hi := 1<<30, 0
	for _, n := range nodes {
		lo, hi = min(lo, got[n.InstanceID]), max(hi, got[n.InstanceID])
	}
	if hi-lo > 2 {
		t.Errorf("unfair split of a short budget: nodes got between %d and %d addresses", lo, hi)
	}
	if len(plan.Unmet) != len(nodes) {
		t.Errorf("%d nodes report unmet demand, want all %d", len(plan.Unmet), len(nodes))
	}
	t.Logf("20000 addresses over 500 nodes: %d..%d each, %d actions", lo, hi, len(plan.Actions))
}
