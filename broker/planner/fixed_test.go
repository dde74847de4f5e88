package planner

import "testing"

// TestMix: Mix counts what MakeWith plans for the same nodes and options,
// under every policy and in both modes.
func TestMix(t *testing.T) {
	budgets := Budgets{"subnet-big": 65531}
	lagged := full(1)
	lagged.NewENILag = 2
	tests := []struct {
		name    string
		mode    Mode
		opt     Options
		want    Shape
		nodes   int
		fixedTo Shape
	}{
		{"prefix, time-optimal", Prefix, Options{Policy: TimeOptimal, Buckets: full(1)}, Shape{275, 225}, 500, Shape{}},
		{"prefix, half share", Prefix, Options{Policy: TimeOptimal, Buckets: full(0.5)}, Shape{263, 237}, 500, Shape{}},
		{"prefix, new ENIs late", Prefix, Options{Policy: TimeOptimal, Buckets: lagged}, Shape{280, 220}, 500, Shape{}},
		{"prefix, fewest calls", Prefix, Options{Policy: FewestCalls, Buckets: full(1)}, Shape{500, 0}, 500, Shape{}},
		{"prefix, naive", Prefix, Options{Policy: Naive, Buckets: full(1)}, Shape{500, 0}, 500, Shape{}},
		{"prefix, fits the buckets", Prefix, Options{Policy: TimeOptimal, Buckets: full(1)}, Shape{100, 0}, 100, Shape{}},
		{"secondary", SecondaryIP, Options{Policy: TimeOptimal, Buckets: full(1)}, Shape{500, 1500}, 500, Shape{}},
		// Ten nodes fixed to a new ENI count as such, and the policy
		// balances the rest around them: 275 Assigns, 225 new ENIs still.
		{"prefix, ten fixed", Prefix, Options{Policy: TimeOptimal, Buckets: full(1)}, Shape{275, 225}, 500, Shape{0, 1}},
		// Under FewestCalls the fixed ten are its only new ENIs.
		{"prefix, ten fixed, fewest calls", Prefix, Options{Policy: FewestCalls}, Shape{490, 10}, 500, Shape{0, 1}},
	}
	for _, tt := range tests {
		nodes := burst500(tt.mode)[:tt.nodes]
		if tt.fixedTo != (Shape{}) {
			tt.opt.Shapes = map[string]Shape{}
			for _, n := range nodes[:10] {
				tt.opt.Shapes[n.InstanceID] = tt.fixedTo
			}
		}
		got := Mix(nodes, tt.opt)
		if got != tt.want {
			t.Errorf("%s: Mix = %+v, want %+v", tt.name, got, tt.want)
		}
		a, c := kinds(MakeWith(nodes, budgets, tt.opt))
		if tt.mode == Prefix && (a != got.Assigns || c != got.Creates) {
			t.Errorf("%s: MakeWith plans %d assigns and %d new ENIs, Mix says %+v", tt.name, a, c, got)
		}
	}
}

// TestFixedShapes: a node given a shape in Options.Shapes is planned in it
// whatever the policy and the buckets would choose, and is never moved; a
// shape the node doesn't have is ignored.
func TestFixedShapes(t *testing.T) {
	budgets := Budgets{"subnet-big": 65531}
	nodes := burst500(Prefix)[:10]
	busyAssigns := full(1)
	busyAssigns.Assign.Tokens, busyAssigns.Assign.Queued = 0, 400
	tests := []struct {
		name  string
		opt   Options
		fixed map[string]Shape
		want  map[string]Kind // the rest: rest
		rest  Kind
	}{
		// Full buckets: time-optimal alone sends all ten to Assigns.
		{"new ENIs fixed, full buckets", Options{Policy: TimeOptimal, Buckets: full(1)},
			map[string]Shape{"i-0003": {0, 1}, "i-0007": {0, 1}},
			map[string]Kind{"i-0003": CreateAttach, "i-0007": CreateAttach}, Assign},
		{"new ENI fixed, fewest calls", Options{Policy: FewestCalls},
			map[string]Shape{"i-0003": {0, 1}}, map[string]Kind{"i-0003": CreateAttach}, Assign},
		// The Assign bucket far behind: time-optimal moves every node to a
		// new ENI but the one fixed to its Assign.
		{"assign fixed, assigns busy", Options{Policy: TimeOptimal, Buckets: busyAssigns},
			map[string]Shape{"i-0005": {1, 0}}, map[string]Kind{"i-0005": Assign}, CreateAttach},
		{"not one of its shapes", Options{Policy: TimeOptimal, Buckets: full(1)},
			map[string]Shape{"i-0005": {2, 0}, "i-0006": {0, 2}}, map[string]Kind{}, Assign},
	}
	for _, tt := range tests {
		tt.opt.Shapes = tt.fixed
		plan := MakeWith(nodes, budgets, tt.opt)
		// A fixed shape is one of the node's shapes, as time-optimal plans
		// are, whatever the policy.
		if err := checkPlanOf(nodes, budgets, plan, TimeOptimal); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(plan.Actions) != len(nodes) {
			t.Fatalf("%s: %d actions for %d nodes: %s", tt.name, len(plan.Actions), len(nodes), fmtActions(plan.Actions))
		}
		for _, a := range plan.Actions {
			want, ok := tt.want[a.InstanceID]
			if !ok {
				want = tt.rest
			}
			if a.Kind != want || a.Count != 3 {
				t.Errorf("%s: %s: %s of %d prefixes, want %s of 3", tt.name, a.InstanceID, a.Kind, a.Count, want)
			}
		}
	}
}

// TestExpected: the first nodes of a burst planned while the rest is still
// gathering (Options.Expected) get the kinds they would get were the whole
// burst planned at once; planned alone, with full buckets, every one of
// them would go to an Assign. The expected nodes get no action.
func TestExpected(t *testing.T) {
	budgets := Budgets{"subnet-big": 65531}
	all := burst500(Prefix)[:250]
	b := full(1)
	b.NewENILag = 1
	var now, later []Node
	for i, n := range all {
		if i%5 == 0 {
			now = append(now, n)
		} else {
			later = append(later, n)
		}
	}
	whole := map[string]Kind{}
	for _, a := range MakeWith(all, budgets, Options{Policy: TimeOptimal, Buckets: b}).Actions {
		whole[a.InstanceID] = a.Kind
	}
	alone := MakeWith(now, budgets, Options{Policy: TimeOptimal, Buckets: b})
	if a, c := kinds(alone); a != len(now) || c != 0 {
		t.Fatalf("planned alone: %d assigns, %d new ENIs; want every one an Assign", a, c)
	}
	opt := Options{Policy: TimeOptimal, Buckets: b, Expected: later}
	plan := MakeWith(now, budgets, opt)
	if err := checkPlanOf(now, budgets, plan, TimeOptimal); err != nil {
		t.Fatal(err)
	}
	if len(plan.Actions) != len(now) {
		t.Fatalf("%d actions for %d nodes planned", len(plan.Actions), len(now))
	}
	creates := 0
	for _, a := range plan.Actions {
		if a.Kind != whole[a.InstanceID] || a.Count != 3 {
			t.Errorf("%s: %s of %d prefixes; planned with the whole burst, %s of 3", a.InstanceID, a.Kind, a.Count, whole[a.InstanceID])
		}
		if a.Kind == CreateAttach {
			creates++
		}
	}
	if creates == 0 {
		t.Error("no new ENI among the first nodes planned")
	}
	if got, want := Mix(now, opt), Mix(all, Options{Policy: TimeOptimal, Buckets: b}); got != want {
		t.Errorf("Mix with the expected = %+v, of the whole burst %+v", got, want)
	}
}
