package planner

import (
	"fmt"
	"testing"
)

// BenchmarkMakeWith2000 plans a 2,000-node burst (46 pods waiting on each
// node, warm targets short by 14 more), the plan a round makes at the
// start of the scale benchmark's burst.
func BenchmarkMakeWith2000(b *testing.B) {
	for _, mode := range []Mode{SecondaryIP, Prefix} {
		b.Run(mode.String(), func(b *testing.B) {
			nodes := make([]Node, 2000)
			for i := range nodes {
				nodes[i] = Node{
					InstanceID: fmt.Sprintf("i-%017x", i*7919), SubnetID: "subnet-big",
					SecurityGroups: []string{"sg-1"}, Mode: mode, Limits: c5xlarge,
					ENIs:    []ENI{{ID: fmt.Sprintf("eni-%04d", i), SubnetID: "subnet-big", Primary: true}},
					Pending: 46, WarmShortfall: 14,
				}
			}
			budgets := Budgets{"subnet-big": 1 << 20}
			opt := Options{Policy: TimeOptimal, Buckets: Buckets{
				Assign: Bucket{Tokens: 100, Refill: 5}, Create: Bucket{Tokens: 100, Refill: 5},
				Attach: Bucket{Tokens: 100, Refill: 5}, Modify: Bucket{Tokens: 100, Refill: 5}}}
			b.ResetTimer()
			for range b.N {
				MakeWith(nodes, budgets, opt)
			}
		})
	}
}
