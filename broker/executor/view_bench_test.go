package executor

import (
	"fmt"
	"testing"

	"github.com/allotnet/allot/broker/store"
)

// BenchmarkViewBetweenRounds times what the view costs between two rounds
// of a burst at 5,000 nodes (three ENIs each): a snapshot lent to the
// round, then 20 ENI changes and 20 demand changes arriving before the
// next one.
func BenchmarkViewBetweenRounds(b *testing.B) {
	const nodes = 5000
	r := &store.Records{Rev: 1}
	for i := range nodes {
		id := fmt.Sprintf("i-%017x", i*7919)
		r.Nodes = append(r.Nodes, store.Node{InstanceID: id, SubnetID: "subnet-1", Rev: 1})
		r.Demands = append(r.Demands, store.Demand{InstanceID: id, Pending: 30})
		r.Usage = append(r.Usage, store.Usage{InstanceID: id})
		for k := range 3 {
			x := store.ENI{ID: fmt.Sprintf("eni-%d-%d", i, k), InstanceID: id, SubnetID: "subnet-1", DeviceIndex: k,
				Primary: k == 0, Status: store.ENIAttached}
			for a := range 14 {
				x.Addresses = append(x.Addresses, fmt.Sprintf("10.%d.%d.%d", k, i/250, a))
			}
			r.ENIs = append(r.ENIs, x)
		}
	}
	r.Subnets = []store.Subnet{{ID: "subnet-1", Usable: 1 << 20}}
	v := &view{}
	v.reset(r)
	b.ReportAllocs()
	b.ResetTimer()
	for n := range b.N {
		_ = v.snapshot(nil)
		var cs []store.Change
		for k := range 20 {
			i := (n*20 + k) * 7 % nodes
			x := r.ENIs[3*i+1]
			x.Rev = int64(n + 2)
			d := r.Demands[i]
			d.Pending = n % 30
			cs = append(cs, store.Change{Kind: store.RecordENI, ID: x.ID, Record: x},
				store.Change{Kind: store.RecordDemand, ID: d.InstanceID, Record: d})
		}
		v.update(store.FollowUpdate{Changes: cs, Rev: int64(n + 2)})
	}
}
