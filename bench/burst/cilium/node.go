package cilium

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/allotnet/allot/agent/cniserver"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Node is one node: the operator's view of it (pkg/ipam.Node) and its
// agent's address pool (pkg/ipam/crd.go).
type Node struct {
	o  *Operator
	id string

	mu sync.Mutex
	// Operator side: waitingForPoolMaintenance, resyncNeeded, the used
	// count the agent last reported, and neededIPs.
	waiting      bool
	resyncNeeded time.Time
	reportedUsed int
	needed       int
	// Agent side: the addresses given to attachments, the pods waiting
	// for one (what the operator's pod watcher counts as pending), and the
	// status update it owes the operator.
	used      map[netip.Addr]cniserver.Attachment
	byKey     map[cniserver.Attachment]netip.Addr
	pending   map[string]bool
	reportDue bool
	lastSent  time.Time

	maintainCh chan struct{}
	actions    atomic.Int64
}

// AddNode is a new CiliumNode: the operator starts its pool maintainer and
// attends to it at once.
func (o *Operator) AddNode(instanceID string) *Node {
	n := &Node{
		o: o, id: instanceID, used: map[netip.Addr]cniserver.Attachment{},
		byKey: map[cniserver.Attachment]netip.Addr{}, pending: map[string]bool{},
		maintainCh: make(chan struct{}, 1),
	}
	o.mu.Lock()
	o.nodes[instanceID] = n
	o.mu.Unlock()
	o.wg.Go(n.maintainLoop)
	n.updatedResource(0)
	return n
}

// pool is the node's addresses in the operator's cache (the CiliumNode's
// spec.ipam.pool), each with its ENI.
func (o *Operator) pool(instanceID string) map[netip.Addr]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[netip.Addr]string{}
	for _, e := range o.cache[instanceID] {
		for _, a := range e.addrs {
			out[a] = e.id
		}
	}
	return out
}

// maxAllocate is GetMaximumAllocatableIPv4 (first interface index 0).
func (o *Operator) maxAllocate() int {
	per := o.cfg.IPv4PerENI - 1
	if o.cfg.PrefixDelegation {
		per *= allotv1.PrefixSize
	}
	return o.cfg.MaxENIs * per
}

// calculateNeededIPs is pkg/ipam's function of the same name.
func calculateNeededIPs(available, used, preAllocate, minAllocate, maxAllocate int) int {
	needed := preAllocate - (available - used)
	if minAllocate > 0 {
		needed = max(needed, minAllocate-available)
	}
	if maxAllocate > 0 && available+needed > maxAllocate {
		needed = maxAllocate - available
	}
	return max(needed, 0)
}

// recalculate refreshes neededIPs from the cache and the reported use.
func (n *Node) recalculate() {
	available := len(n.o.pool(n.id))
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.o.cfg
	n.needed = calculateNeededIPs(available, n.reportedUsed, c.PreAllocate, c.MinAllocate, n.o.maxAllocate())
}

func (n *Node) neededIPs() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.needed
}

// attendLocked is the tail of UpdatedResource and resyncNode: a node in
// deficit that is neither being maintained nor waiting for a resync gets
// its maintainer triggered.
func (n *Node) attend() {
	n.mu.Lock()
	need := !n.waiting && n.resyncNeeded.IsZero() && n.needed > 0
	if need {
		n.waiting = true
	}
	n.mu.Unlock()
	if need {
		select {
		case n.maintainCh <- struct{}{}:
		default:
		}
	}
}

// updatedResource is the operator receiving the agent's CiliumNode update.
func (n *Node) updatedResource(used int) {
	n.mu.Lock()
	n.reportedUsed = used
	n.mu.Unlock()
	n.recalculate()
	n.attend()
}

// resynced is resyncNode after a resync that started at start.
func (n *Node) resynced(start time.Time) {
	n.mu.Lock()
	if start.After(n.resyncNeeded) {
		n.resyncNeeded = time.Time{}
	}
	n.mu.Unlock()
	n.recalculate()
	n.attend()
}

// maintainLoop is the node's pool-maintainer trigger.
func (n *Node) maintainLoop() {
	for {
		select {
		case <-n.o.runCtx.Done():
			return
		case <-n.maintainCh:
		}
		n.maintainIPPool(n.o.runCtx)
	}
}

// maintainIPPool is Node.MaintainIPPool: nothing while the instances API
// is not ready (a retry a minute later); otherwise one action, then a wait
// for the resync it triggers.
func (n *Node) maintainIPPool(ctx context.Context) {
	n.o.mu.Lock()
	ready := n.o.ready
	n.o.mu.Unlock()
	if !ready {
		time.AfterFunc(n.o.wall(time.Minute), func() {
			n.mu.Lock()
			n.waiting = false
			n.mu.Unlock()
			n.attend()
		})
		return
	}
	mutated, err := n.allocate(ctx)
	n.mu.Lock()
	if err == nil {
		n.resyncNeeded = time.Now()
	}
	n.waiting = false
	n.mu.Unlock()
	if mutated {
		n.actions.Add(1)
	}
	if err != nil {
		n.o.log.Debug("maintain pool", "instance", n.id, "err", err)
	}
	n.recalculate()
	if mutated || err != nil {
		n.o.triggerResync()
	}
}

// Add is the agent's ADD: a free address from the pool at once, or a
// failure the runtime retries later.
func (n *Node) Add(_ context.Context, req cniserver.Request) (cniserver.AddResult, error) {
	pool := n.o.pool(n.id)
	n.mu.Lock()
	defer n.mu.Unlock()
	if a, ok := n.byKey[req.Attachment]; ok {
		return cniserver.AddResult{Address: netip.PrefixFrom(a, 32), ENIID: pool[a]}, nil
	}
	free := make([]netip.Addr, 0, len(pool))
	for a := range pool {
		if _, taken := n.used[a]; !taken {
			free = append(free, a)
		}
	}
	if len(free) == 0 {
		n.pending[req.PodName] = true
		return cniserver.AddResult{}, fmt.Errorf("%w: no more IPs available in the node's pool", cniserver.ErrPoolEmpty)
	}
	a := slices.MinFunc(free, func(x, y netip.Addr) int { return x.Compare(y) })
	n.used[a], n.byKey[req.Attachment] = req.Attachment, a
	delete(n.pending, req.PodName)
	n.reportLocked()
	return cniserver.AddResult{Address: netip.PrefixFrom(a, 32), ENIID: pool[a]}, nil
}

// Del frees the attachment's address.
func (n *Node) Del(_ context.Context, req cniserver.Request) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a, ok := n.byKey[req.Attachment]; ok {
		delete(n.byKey, req.Attachment)
		delete(n.used, a)
		n.reportLocked()
	}
	return nil
}

// reportLocked schedules the agent's CiliumNode status update, at most one
// per NodeUpdateRate.
func (n *Node) reportLocked() {
	if n.reportDue {
		return
	}
	n.reportDue = true
	delay := max(time.Until(n.lastSent.Add(n.o.wall(n.o.cfg.NodeUpdateRate))), 0)
	time.AfterFunc(delay, func() {
		n.mu.Lock()
		n.reportDue, n.lastSent = false, time.Now()
		used := len(n.used)
		n.mu.Unlock()
		n.updatedResource(used)
	})
}

// pendingPods is how many of the node's pods wait for an address.
func (n *Node) pendingPods() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.pending)
}

// Settled reports that the node needs nothing: its pool is at its
// watermarks or it cannot grow.
func (n *Node) Settled() bool {
	n.recalculate()
	return n.neededIPs() == 0
}

// PoolActions is how many times the operator changed the node's ENIs or
// addresses.
func (n *Node) PoolActions() int64 { return n.actions.Load() }

// String describes the node for diagnostics.
func (n *Node) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return fmt.Sprintf("%s: needed %d, used %d (reported %d), pending %d, waiting %v", n.id, n.needed, len(n.used), n.reportedUsed, len(n.pending), n.waiting)
}
