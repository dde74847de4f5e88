package brokerlink

import (
	"sync"

	"github.com/allotnet/allot/agent/pool"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// testArrivals is a stateful stand-in for the daemon's arrivals: the node
// sees every delivery at once (the ENI is recorded in the pool and its
// addresses added inside Await), or, held, never, and everything stays
// awaited. The daemon's own tests confirm deliveries in awssim's IMDS.
type testArrivals struct {
	pool *pool.Pool
	held bool

	mu      sync.Mutex
	pending map[string]Delivery
}

var _ Arrivals = (*testArrivals)(nil)

func newTestArrivals(p *pool.Pool, held bool) *testArrivals {
	return &testArrivals{pool: p, held: held, pending: map[string]Delivery{}}
}

func (a *testArrivals) Await(d Delivery) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held {
		a.pending[d.ENIID] = d
		return
	}
	if _, ok := a.pool.ENI(d.ENIID); !ok {
		if err := a.pool.AddENI(pool.ENI{ID: d.ENIID, MAC: d.MAC, DeviceIndex: d.DeviceIndex, Primary: d.DeviceIndex == 0}); err != nil {
			a.pending[d.ENIID] = d
			return
		}
	}
	if _, err := a.pool.AddCapacity(d.ENIID, d.Addrs, d.Prefixes); err != nil {
		a.pending[d.ENIID] = d
		return
	}
	delete(a.pending, d.ENIID)
}

func (a *testArrivals) Forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.pending, id)
}

func (a *testArrivals) Hold(f func(int)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, d := range a.pending {
		n += allotv1.PodAddresses(len(d.Addrs), len(d.Prefixes))
	}
	f(n)
}
