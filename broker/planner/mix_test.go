package planner

import (
	"reflect"
	"testing"
)

func TestShapes(t *testing.T) {
	primary := eni("eni-0", 0, 0, 0)
	tests := []struct {
		name string
		n    Node
		want []Shape
	}{
		{"no demand", node("i-1", c5xlarge, primary), []Shape{{0, 0}}},
		// 46 pods in /28s are 3 prefixes: the primary holds them in one
		// Assign, or a new ENI in one Create.
		{"prefix burst", with(node("i-1", c5xlarge, primary), func(n *Node) { n.Mode = Prefix; n.Pending = 46 }),
			[]Shape{{1, 0}, {0, 1}}},
		// 46 secondary addresses need all four ENIs: 14 on the primary
		// and three new ones, whatever the policy.
		{"secondary burst", with(node("i-1", c5xlarge, primary), func(n *Node) { n.Pending = 46 }),
			[]Shape{{1, 3}}},
		// Free slots 14 and 2; 20 wanted: one new ENI and the primary (the
		// 2-slot ENI is not needed), or two new ENIs.
		{"fewest assigns for the rest", with(node("i-1", c5xlarge, primary, eni("eni-1", 1, 12, 0)), func(n *Node) { n.Pending = 20 }),
			[]Shape{{1, 1}, {0, 2}}},
		// Only existing ENIs hold it when no ENI may be added.
		{"busy", with(node("i-1", c5xlarge, primary), func(n *Node) { n.Mode = Prefix; n.Pending = 46; n.Busy = true }),
			[]Shape{{1, 0}}},
		{"capped at one ENI", with(node("i-1", c5xlarge, primary), func(n *Node) { n.Mode = Prefix; n.Pending = 46; n.MaxENIs = 1 }),
			[]Shape{{1, 0}}},
		// Full node: what it can take, which is nothing.
		{"full", with(node("i-1", Limits{MaxENIs: 1, IPv4PerENI: 3}, eni("eni-0", 0, 2, 0)), func(n *Node) { n.Pending = 5 }),
			[]Shape{{0, 0}}},
		// 30 wanted, 14 free on the primary, 2 new ENIs allowed: only the
		// primary and both new ENIs (14+14+2) do, or nothing covers it.
		{"needs everything", with(node("i-1", Limits{MaxENIs: 3, IPv4PerENI: 15}, primary), func(n *Node) { n.Pending = 30 }),
			[]Shape{{1, 2}}},
		{"more than it can hold", with(node("i-1", Limits{MaxENIs: 3, IPv4PerENI: 15}, primary), func(n *Node) { n.Pending = 50 }),
			[]Shape{{1, 2}}},
	}
	for _, tt := range tests {
		if got := Shapes(tt.n); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Shapes = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// full is every bucket full at the given share of EC2's table, as a
// limiter keeps them: Assign, Create and Modify 100 at 5/s, Attach 50 at
// 5/s.
func full(share float64) Buckets {
	return Buckets{
		Assign: Bucket{Tokens: 100 * share, Refill: 5 * share},
		Create: Bucket{Tokens: 100 * share, Refill: 5 * share},
		Attach: Bucket{Tokens: 50 * share, Refill: 5 * share},
		Modify: Bucket{Tokens: 100 * share, Refill: 5 * share},
	}
}

func kinds(p Plan) (assigns, creates int) {
	for _, a := range p.Actions {
		if a.Kind == Assign {
			assigns++
		} else {
			creates++
		}
	}
	return assigns, creates
}

// TestTimeOptimalBurst500 checks the mix by hand. Prefix mode, 500 nodes
// of 3 prefixes each, full buckets: x Assigns are out at (x-100)/5 s, y new
// ENIs at (y-50)/5 s (Attach's smaller bucket decides); x+y = 500 ends
// earliest at x-100 = y-50, x = 275, y = 225: 35 s instead of 80 s. At half
// share (x-50)/2.5 = (y-25)/2.5 gives x = 262.5: 263 and 237 end at 85.2 s,
// 262 and 238 at 85.2 s too, so the first, with fewer calls, stays. With
// secondary IPs every node needs its three new ENIs and the primary's
// Assign anyway: the plan is FewestCalls'.
func TestTimeOptimalBurst500(t *testing.T) {
	budgets := Budgets{"subnet-big": 65531}
	tests := []struct {
		name             string
		mode             Mode
		buckets          Buckets
		assigns, creates int
	}{
		{"prefix, whole share", Prefix, full(1), 275, 225},
		{"prefix, half share", Prefix, full(0.5), 263, 237},
		// 400 Assigns already queued: (400+x)/5 = (y-50)/5 at x = 25.
		{"prefix, assigns queued", Prefix, func() Buckets { b := full(1); b.Assign.Tokens, b.Assign.Queued = 0, 400; return b }(), 25, 475},
		// New ENIs reach their nodes 2 s after their calls: x-100 =
		// y-50+2*5, x = 280, both reach the nodes at 36 s.
		{"prefix, new ENIs 2 s late", Prefix, func() Buckets { b := full(1); b.NewENILag = 2; return b }(), 280, 220},
		// New ENIs' buckets busier than Assign's: nothing moves.
		{"prefix, attaches queued", Prefix, func() Buckets { b := full(1); b.Attach.Queued = 500; return b }(), 500, 0},
		{"secondary", SecondaryIP, full(1), 500, 1500},
		{"prefix, buckets unknown", Prefix, Buckets{}, 500, 0},
	}
	for _, tt := range tests {
		nodes := burst500(tt.mode)
		plan := MakeWith(nodes, budgets, Options{Policy: TimeOptimal, Buckets: tt.buckets})
		if err := checkPlanOf(nodes, budgets, plan, TimeOptimal); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if a, c := kinds(plan); a != tt.assigns || c != tt.creates {
			t.Errorf("%s: %d assigns, %d new ENIs; want %d, %d", tt.name, a, c, tt.assigns, tt.creates)
		}
		for _, a := range plan.Actions {
			if tt.mode == Prefix && a.Count != 3 {
				t.Errorf("%s: %+v, want 3 prefixes", tt.name, a)
				break
			}
		}
	}
}

// TestTimeOptimalPrefersBetterTrades: with Assigns the bottleneck, the node
// that saves two Assigns with one new ENI moves before the ones that save
// one.
func TestTimeOptimalPrefersBetterTrades(t *testing.T) {
	// i-0 has two small ENIs (5 free slots each) and wants 8 addresses:
	// two Assigns, or one new ENI. The others want 3 on their primary: one
	// Assign, or one new ENI.
	nodes := []Node{with(node("i-0", c5xlarge, eni("eni-00", 0, 9, 0), eni("eni-01", 1, 9, 0)), func(n *Node) { n.Pending = 8 })}
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		nodes = append(nodes, with(node(id, c5xlarge, eni("eni-"+id, 0, 0, 0)), func(n *Node) { n.Pending = 3 }))
	}
	// Five Assigns cost 1 s each; a new ENI costs 1.5 s.
	b := Buckets{Assign: Bucket{Refill: 1}, Create: Bucket{Refill: 2}, Attach: Bucket{Refill: 2}, Modify: Bucket{Refill: 2}}
	plan := MakeWith(nodes, Budgets{"subnet-a": 1000}, Options{Policy: TimeOptimal, Buckets: b})
	// 5 Assigns end at 5 s. Moving i-0: 3 Assigns (3 s), 1 new ENI (0.5 s).
	// Then i-1: 2 Assigns, 2 new ENIs: 2 s vs 1 s. Then i-2: 1 vs 1.5 s;
	// then i-3 would give 0 vs 2 s, later than 1.5: stop.
	want := map[string]Kind{"i-0": CreateAttach, "i-1": CreateAttach, "i-2": CreateAttach, "i-3": Assign}
	for _, a := range plan.Actions {
		if want[a.InstanceID] != a.Kind {
			t.Errorf("%s: %s, want %s", a.InstanceID, a.Kind, want[a.InstanceID])
		}
	}
	if len(plan.Actions) != 4 {
		t.Errorf("%d actions, want 4: %s", len(plan.Actions), fmtActions(plan.Actions))
	}
}

func TestParsePolicy(t *testing.T) {
	for _, p := range []Policy{TimeOptimal, FewestCalls} {
		if got, err := ParsePolicy(p.String()); err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := ParsePolicy("fastest"); err == nil {
		t.Error("ParsePolicy(fastest) accepted")
	}
}
