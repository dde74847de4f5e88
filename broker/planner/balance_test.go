package planner

import (
	"cmp"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// byNodeAndTarget orders actions by node, then target, so that plans of
// the same actions in different orders compare equal.
func byNodeAndTarget(as []Action) []Action {
	out := slices.Clone(as)
	slices.SortFunc(out, func(a, b Action) int {
		return cmp.Or(strings.Compare(a.InstanceID, b.InstanceID), cmp.Compare(a.Kind, b.Kind),
			strings.Compare(a.ENIID, b.ENIID), cmp.Compare(a.DeviceIndex, b.DeviceIndex))
	})
	return out
}

// TestBalancedPartsMatchWhole: on many random clusters (both modes, both
// policies, buckets in any state, demand still gathering, fixed shapes),
// with budgets that cover everything, planning the nodes a part at a time
// with the balance struck over all of them gives every node the very
// actions, and the same unmet demand, that planning them all at once does.
func TestBalancedPartsMatchWhole(t *testing.T) {
	r := rand.New(rand.NewSource(20261127))
	moved := 0
	for iter := range 400 {
		nodes, budgets := randomCluster(r, 1+r.Intn(40))
		for i := range nodes {
			nodes[i].InstanceID = fmt.Sprintf("i-%03d", i)
		}
		for _, s := range []string{"subnet-a", "subnet-b", "subnet-c"} {
			budgets[s] = 1 << 40
		}
		opt := Options{Policy: FewestCalls}
		if iter%4 != 0 {
			opt = Options{Policy: TimeOptimal, Buckets: randomBuckets(r)}
		}
		if iter%3 == 0 {
			opt.Expected, _ = randomCluster(r, r.Intn(20))
			for i := range opt.Expected {
				opt.Expected[i].InstanceID = fmt.Sprintf("i-x%03d", i)
			}
		}
		if iter%5 == 0 {
			opt.Shapes = map[string]Shape{}
			for _, n := range nodes[:len(nodes)/2] {
				sh := Shapes(n)
				opt.Shapes[n.InstanceID] = sh[r.Intn(len(sh))]
			}
		}
		whole := MakeWith(nodes, budgets, opt)
		if !reflect.DeepEqual(whole, MakeWith(nodes, budgets, Options{Policy: FewestCalls})) {
			moved++
		}

		bal := Balanced(nodes, opt)
		shuffled := slices.Clone(nodes)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		var got []Action
		unmet := map[string]Shortfall{}
		for len(shuffled) > 0 {
			k := 1 + r.Intn(len(shuffled))
			p := MakeWith(shuffled[:k], budgets, Options{Policy: opt.Policy, Buckets: opt.Buckets, Balance: bal})
			got = append(got, p.Actions...)
			for id, sf := range p.Unmet {
				unmet[id] = sf
			}
			shuffled = shuffled[k:]
		}
		if want := byNodeAndTarget(whole.Actions); !reflect.DeepEqual(byNodeAndTarget(got), want) {
			t.Fatalf("iteration %d (%v): in parts\n%s\nat once\n%s", iter, opt.Policy, fmtActions(byNodeAndTarget(got)), fmtActions(want))
		}
		if !reflect.DeepEqual(unmet, whole.Unmet) {
			t.Fatalf("iteration %d: unmet in parts %v, at once %v", iter, unmet, whole.Unmet)
		}
	}
	if moved < 30 {
		t.Errorf("only %d of 400 plans differ from FewestCalls: the test does not exercise the balance", moved)
	}
	t.Logf("%d of 400 plans differ from FewestCalls", moved)
}

// TestCalls: with budgets that cover everything, Calls names exactly the
// kinds of call the plan gives each node, in the shape the balance gave it.
func TestCalls(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for iter := range 200 {
		nodes, budgets := randomCluster(r, 1+r.Intn(30))
		for i := range nodes {
			nodes[i].InstanceID = fmt.Sprintf("i-%03d", i)
		}
		for _, s := range []string{"subnet-a", "subnet-b", "subnet-c"} {
			budgets[s] = 1 << 40
		}
		opt := Options{Policy: TimeOptimal, Buckets: randomBuckets(r)}
		bal := Balanced(nodes, opt)
		p := MakeWith(nodes, budgets, opt)
		for _, n := range nodes {
			var assign, create bool
			for _, a := range p.Actions {
				if a.InstanceID == n.InstanceID {
					assign = assign || a.Kind == Assign
					create = create || a.Kind == CreateAttach
				}
			}
			if ga, gc := Calls(n, bal); ga != assign || gc != create {
				t.Fatalf("iteration %d, %s: Calls says assign %v, create %v; the plan %v, %v\n%s",
					iter, n.InstanceID, ga, gc, assign, create, fmtActions(p.Actions))
			}
		}
	}
}
