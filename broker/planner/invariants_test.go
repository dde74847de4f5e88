package planner

import (
	"fmt"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"math/rand"
	"reflect"
	"testing"
)

// randomCluster builds a cluster with random types, ENIs (holes in device
// indexes included), demands and budgets, from a fixed seed.
func randomCluster(r *rand.Rand, nodes int) ([]Node, Budgets) {
	types := []Limits{c5xlarge, m5x24large, xenSmall, {MaxENIs: 3, IPv4PerENI: 10, PrefixCapable: true}}
	subnets := []string{"subnet-a", "subnet-b", "subnet-c"}
	budgets := Budgets{}
	for _, s := range subnets {
		if r.Intn(5) > 0 { // sometimes a subnet has no budget entry at all
			budgets[s] = int64(r.Intn(400))
		}
	}
	var out []Node
	for i := 0; i < nodes; i++ {
		l := types[r.Intn(len(types))]
		n := Node{
			InstanceID:     fmt.Sprintf("i-%03d", r.Intn(1000)), // duplicates possible
			SubnetID:       subnets[r.Intn(len(subnets))],
			SecurityGroups: []string{"sg-1"},
			Mode:           Mode(1 + r.Intn(2)),
			Limits:         l,
			MaxENIs:        r.Intn(l.MaxENIs + 1),
			Pending:        r.Intn(60),
			WarmShortfall:  r.Intn(20),
			InFlight:       r.Intn(10),
			Busy:           r.Intn(6) == 0,
		}
		for dev := 0; dev < l.MaxENIs; dev++ {
			if dev > 0 && r.Intn(2) == 0 {
				continue // a hole
			}
			used := r.Intn(l.IPv4PerENI)
			e := ENI{ID: fmt.Sprintf("eni-%d-%d", i, dev), DeviceIndex: dev, SubnetID: subnets[r.Intn(len(subnets))], Primary: dev == 0}
			if r.Intn(2) == 0 {
				e.Prefixes = used
			} else {
				e.Secondary = used
			}
			n.ENIs = append(n.ENIs, e)
		}
		out = append(out, n)
	}
	return out, budgets
}

// TestMakeInvariants checks, on many random clusters, what every plan must
// hold whatever the inputs: never beyond a budget, an ENI's slots or a
// node's ENI limit; at most one call per existing ENI; distinct, free
// device indexes; no new ENI for a busy node; prefixes only where they
// work; every node's demand either planned or reported unmet, and never
// over-planned; a new ENI only once the node's existing ENIs are full or
// out of budget.
func TestMakeInvariants(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for iter := 0; iter < 300; iter++ {
		nodes, budgets := randomCluster(r, 1+r.Intn(12))
		plan := Make(nodes, budgets)
		if err := checkPlan(nodes, budgets, plan); err != nil {
			t.Fatalf("iteration %d: %v\nplan: %s\nunmet: %v", iter, err, fmtActions(plan.Actions), plan.Unmet)
		}
	}
}

func checkPlan(nodes []Node, budgets Budgets, plan Plan) error {
	return checkPlanOf(nodes, budgets, plan, FewestCalls)
}

// checkPlanOf is checkPlan for a plan made under policy: under
// TimeOptimal a new ENI may come before existing ENIs are full, but each
// met node's calls must be one of its shapes or FewestCalls' for it.
func checkPlanOf(nodes []Node, budgets Budgets, plan Plan, policy Policy) error {
	spent := map[string]int64{}
	for _, a := range plan.Actions {
		spent[a.SubnetID] += a.Cost()
		if a.Count <= 0 {
			return fmt.Errorf("action with count %d", a.Count)
		}
	}
	for s, c := range spent {
		if c > budgets[s] {
			return fmt.Errorf("subnet %s: planned %d, budget %d", s, c, budgets[s])
		}
	}
	// Duplicate instance IDs make per-instance checks ambiguous; check the
	// unique ones.
	count := map[string]int{}
	for _, n := range nodes {
		count[n.InstanceID]++
	}
	warmSeen := false
	for _, a := range plan.Actions {
		if a.Urgent && warmSeen {
			return fmt.Errorf("urgent action after a warm one")
		}
		warmSeen = warmSeen || !a.Urgent
	}
	for _, n := range nodes {
		if count[n.InstanceID] != 1 {
			continue
		}
		var mine []Action
		for _, a := range plan.Actions {
			if a.InstanceID == n.InstanceID {
				mine = append(mine, a)
			}
		}
		mode := effectiveMode(&n)
		unit := 1
		if mode == Prefix {
			unit = allotv1.PrefixSize
		}
		existing := map[string]ENI{}
		devs := map[int]bool{0: true}
		for _, e := range n.ENIs {
			existing[e.ID] = e
			devs[e.DeviceIndex] = true
		}
		enis := len(devs)
		assigned := map[string]int{}
		granted := 0
		creates := 0
		for _, a := range mine {
			if a.Mode != mode {
				return fmt.Errorf("%s: action mode %d, node mode %d", n.InstanceID, a.Mode, mode)
			}
			granted += a.Addresses()
			switch a.Kind {
			case Assign:
				e, ok := existing[a.ENIID]
				if !ok {
					return fmt.Errorf("%s: assign to unknown ENI %s", n.InstanceID, a.ENIID)
				}
				if assigned[a.ENIID] > 0 {
					return fmt.Errorf("%s: two assigns to %s", n.InstanceID, a.ENIID)
				}
				assigned[a.ENIID] = a.Count
				if e.Slots()+a.Count > n.Limits.IPv4PerENI {
					return fmt.Errorf("%s: %s overfilled", n.InstanceID, a.ENIID)
				}
			case CreateAttach:
				creates++
				if n.Busy {
					return fmt.Errorf("%s: new ENI for a busy node", n.InstanceID)
				}
				if devs[a.DeviceIndex] {
					return fmt.Errorf("%s: device index %d taken", n.InstanceID, a.DeviceIndex)
				}
				devs[a.DeviceIndex] = true
				enis++
				if a.Count > n.Limits.IPv4PerENI-1 {
					return fmt.Errorf("%s: new ENI with %d slots", n.InstanceID, a.Count)
				}
				if a.SubnetID != n.SubnetID {
					return fmt.Errorf("%s: new ENI in %s, node subnet %s", n.InstanceID, a.SubnetID, n.SubnetID)
				}
			}
		}
		if creates > 0 && enis > maxENIs(&n) {
			return fmt.Errorf("%s: %d ENIs, limit %d", n.InstanceID, enis, maxENIs(&n))
		}
		if policy == TimeOptimal && ample(budgets) && len(plan.Unmet) == 0 &&
			!hasShape(append(Shapes(n), fewestShape(n)), Shape{len(assigned), creates}) {
			return fmt.Errorf("%s: %d assigns and %d new ENIs, not one of its shapes %v", n.InstanceID, len(assigned), creates, Shapes(n))
		}
		if creates > 0 && policy == FewestCalls {
			for _, e := range n.ENIs {
				free := n.Limits.IPv4PerENI - e.Slots() - assigned[e.ID]
				if free > 0 && budgets[e.SubnetID]-spent[e.SubnetID] >= int64(unit) {
					return fmt.Errorf("%s: new ENI while %s has %d free slots and budget", n.InstanceID, e.ID, free)
				}
			}
		}
		demand := max(n.Pending+n.WarmShortfall-n.InFlight, 0)
		if granted >= demand+unit {
			return fmt.Errorf("%s: planned %d addresses for demand %d", n.InstanceID, granted, demand)
		}
		u, hasUnmet := plan.Unmet[n.InstanceID]
		if granted < demand {
			if !hasUnmet || u.Addresses != demand-granted || u.Reason == 0 {
				return fmt.Errorf("%s: demand %d, planned %d, unmet %+v", n.InstanceID, demand, granted, u)
			}
		} else if hasUnmet {
			return fmt.Errorf("%s: demand met but unmet %+v", n.InstanceID, u)
		}
	}
	return nil
}

// ample reports whether no budget can have cut a node's plan short.
func ample(b Budgets) bool {
	for _, s := range []string{"subnet-a", "subnet-b", "subnet-c"} {
		if b[s] < 1<<20 {
			return false
		}
	}
	return true
}

// fewestShape is the Assigns and new ENIs of FewestCalls' plan for n alone.
func fewestShape(n Node) Shape {
	var s Shape
	for _, a := range Make([]Node{n}, Budgets{"subnet-a": 1 << 20, "subnet-b": 1 << 20, "subnet-c": 1 << 20}).Actions {
		if a.Kind == Assign {
			s.Assigns++
		} else {
			s.Creates++
		}
	}
	return s
}

func hasShape(shapes []Shape, s Shape) bool {
	for _, x := range shapes {
		if x == s {
			return true
		}
	}
	return false
}

// randomBuckets are buckets in any state: full, drained, with calls
// waiting on credit or queued, so that TimeOptimal has reason to move.
func randomBuckets(r *rand.Rand) Buckets {
	b := func() Bucket {
		return Bucket{Tokens: float64(r.Intn(60) - 20), Refill: float64(1 + r.Intn(10)), Queued: r.Intn(40)}
	}
	return Buckets{Assign: b(), Create: b(), Attach: b(), Modify: b()}
}

// TestMakeTimeOptimalInvariants is TestMakeInvariants under TimeOptimal,
// with buckets in random states.
func TestMakeTimeOptimalInvariants(t *testing.T) {
	r := rand.New(rand.NewSource(17))
	moved := 0
	for iter := 0; iter < 300; iter++ {
		nodes, budgets := randomCluster(r, 1+r.Intn(12))
		if iter%2 == 0 {
			for _, s := range []string{"subnet-a", "subnet-b", "subnet-c"} {
				budgets[s] = 1 << 20
			}
		}
		opt := Options{Policy: TimeOptimal, Buckets: randomBuckets(r)}
		plan := MakeWith(nodes, budgets, opt)
		if err := checkPlanOf(nodes, budgets, plan, TimeOptimal); err != nil {
			t.Fatalf("iteration %d: %v\nplan: %s\nunmet: %v", iter, err, fmtActions(plan.Actions), plan.Unmet)
		}
		if !reflect.DeepEqual(plan, Make(nodes, budgets)) {
			moved++
		}
		for i := range nodes {
			nodes[i].InstanceID = fmt.Sprintf("i-%02d", i)
		}
		want := MakeWith(nodes, budgets, opt)
		r.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
		if got := MakeWith(nodes, budgets, opt); !reflect.DeepEqual(got, want) {
			t.Fatalf("iteration %d: plan depends on input order:\n%s\nvs%s", iter, fmtActions(got.Actions), fmtActions(want.Actions))
		}
	}
	if moved < 30 {
		t.Errorf("only %d of 300 random clusters planned differently from FewestCalls: the test does not exercise TimeOptimal", moved)
	}
	t.Logf("%d of 300 plans differ from FewestCalls", moved)
}

// TestMakeDeterministic: the order nodes come in changes nothing.
func TestMakeDeterministic(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for iter := 0; iter < 100; iter++ {
		nodes, budgets := randomCluster(r, 8)
		// Unique IDs: with duplicates, input order is the documented
		// tie-break and may matter.
		for i := range nodes {
			nodes[i].InstanceID = fmt.Sprintf("i-%02d", i)
		}
		want := Make(nodes, budgets)
		shuffled := append([]Node(nil), nodes...)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got := Make(shuffled, budgets)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("iteration %d: plan depends on input order:\n%s\nvs%s", iter, fmtActions(got.Actions), fmtActions(want.Actions))
		}
	}
}
