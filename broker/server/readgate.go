package server

import (
	"context"
	"sync"
)

// readSlots is how many reads of a node's ENIs from etcd the node service
// runs at once. Each makes etcd scan every ENI record of the cluster; they
// happen when the hub is behind, which is when etcd is already slow (a
// large fleet joining), and thousands of agents at once would make it
// slower still, until the leader's own lease renewals time out.
const readSlots = 2

// readGate lets at most readSlots reads run at once; its zero value is
// ready to use.
type readGate struct {
	once  sync.Once
	slots chan struct{}
}

func (g *readGate) init() { g.once.Do(func() { g.slots = make(chan struct{}, readSlots) }) }

// acquire waits for a slot (or ctx) and returns its release.
func (g *readGate) acquire(ctx context.Context) (func(), error) {
	g.init()
	select {
	case g.slots <- struct{}{}:
		return func() { <-g.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// free reports whether a slot is free now.
func (g *readGate) free() bool {
	g.init()
	return len(g.slots) < cap(g.slots)
}
