package executor

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"

	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
)

// TestNodeMemo: over a run of changes to the records (node records, ENI
// lists, demands, pod networks coming and going), every node's planner
// view from the memo, and whether it has a choice of shapes, is what
// building it afresh gives.
func TestNodeMemo(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	e, snap := burstState(40)
	rs := newRunState(func(error) {})
	hits := 0
	for step := range 400 {
		i := r.Intn(len(snap.nodes))
		n := snap.nodes[i]
		switch r.Intn(6) {
		case 0: // the node record changes
			n.WarmIPTarget, n.Rev = r.Intn(2)*14, n.Rev+1000
			n.Mode = []string{"secondary-ip", "prefix"}[r.Intn(2)]
			snap.nodes[i], snap.node[n.InstanceID] = n, n
		case 1: // its ENIs change: a new list, as the view makes
			l := slices.Clone(snap.byNode.at(n.InstanceID))
			k := r.Intn(len(l))
			l[k].Addresses = append(slices.Clone(l[k].Addresses), fmt.Sprintf("10.9.%d.%d", step/250, step%250))
			if r.Intn(3) == 0 {
				l = append(l, store.ENI{ID: fmt.Sprintf("eni-new-%d", step), InstanceID: n.InstanceID, SubnetID: n.SubnetID,
					DeviceIndex: 3, Status: store.ENIAttached})
			}
			snap.byNode.set(n.InstanceID, l)
		case 2: // its demand changes
			d := snap.demands.at(n.InstanceID)
			d.Pending, d.WarmShortfall = r.Intn(40), r.Intn(15)
			snap.demands.set(n.InstanceID, d)
		case 3: // pod networks come or go
			if len(snap.podnets) == 0 {
				snap.podnets = []store.PodNetwork{{Name: "pods", SubnetIDs: []string{"subnet-1", "subnet-2"}}}
			} else {
				snap.podnets = nil
			}
		}
		for _, n := range snap.nodes {
			d := snap.demands.at(n.InstanceID)
			want, whyWant := e.plannerNode(newRunState(func(error) {}), snap, n, d)
			got, why := e.plannerNode(rs, snap, n, d)
			if why != whyWant || !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d, %s: from the memo %+v (%q), afresh %+v (%q)", step, n.InstanceID, got, why, want, whyWant)
			}
			if why == "" {
				if c, w := rs.nodes.hasChoice(got), len(planner.Shapes(want)) > 1; c != w {
					t.Fatalf("step %d, %s: choice from the memo %v, afresh %v", step, n.InstanceID, c, w)
				}
			}
			if m, ok := rs.nodes[n.InstanceID]; ok && m.known {
				hits++
			}
		}
	}
	if hits < 1000 {
		t.Errorf("the memo answered %d times: the test does not exercise it", hits)
	}
}
