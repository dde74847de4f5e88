package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/hostnet"
)

// GC removes every attachment of req.Network that the runtime no longer
// holds (CNI 1.1 GC, cni.dev/valid-attachments) — each as a DEL would, so
// host pieces go before the address — and then removes host devices, rules
// and routes of ours that no record of any network accounts for. An
// attachment recorded after the GC began is left alone: the runtime's list
// predates it.
func (a *Agent) GC(ctx context.Context, req cniserver.GCRequest) (removed []cniserver.Attachment, err error) {
	if !a.ready.Load() {
		return nil, fmt.Errorf("gc %s: %w", req.Network, cniserver.ErrNotReady)
	}
	start := time.Now()
	defer func() { a.tel.request(ctx, "gc", start, err) }()
	began := a.clock.Now()
	valid := map[cniserver.Attachment]bool{}
	for _, v := range req.Valid {
		valid[v] = true
	}
	var errs []error
	for _, al := range a.pool.Allocations() {
		att := cniserver.Attachment{Network: al.Network, ContainerID: al.ContainerID, IfName: al.IfName}
		if al.Network != req.Network || valid[att] {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if err := a.gcOne(att, began); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, att)
	}
	if err := a.removeStrays(); err != nil {
		errs = append(errs, err)
	}
	if len(removed) > 0 {
		a.log.Info("gc removed attachments the runtime no longer holds", "network", req.Network, "count", len(removed))
	}
	return removed, errors.Join(errs...)
}

// gcOne deletes one attachment as a DEL queued at began would.
func (a *Agent) gcOne(att cniserver.Attachment, began time.Time) error {
	key := keyOf(att)
	unlock := a.keys.lock(key)
	defer unlock()
	a.netMu.RLock()
	defer a.netMu.RUnlock()
	if _, ok := a.pool.Get(key); !ok {
		return nil
	}
	teardown, err := a.delLocked(key, cniserver.Request{Attachment: att, QueuedAt: began})
	if teardown != nil {
		teardown()
	}
	return err
}

// removeStrays compares the host with every record and deletes what no
// record accounts for. It holds netMu's write side: no pod is set up or
// torn down meanwhile, so none is mistaken for stray or restored halfway
// through its teardown.
func (a *Agent) removeStrays() error {
	_, _, err := a.reconcileHost("gc")
	return err
}

// reconcileHost is removeStrays, also returning what Reconcile restored
// and how many stray pieces were removed. Reconcile restores the missing
// pieces of recorded pods whose namespace exists; nothing here touches
// the pool, so no address is freed.
func (a *Agent) reconcileHost(why string) (hostnet.Report, int, error) {
	a.netMu.Lock()
	defer a.netMu.Unlock()
	// Failed teardowns held back so far are strays by now (their records
	// are gone): once the strays are removed, their addresses are clear.
	held := a.heldTeardowns.take()
	rep, err := a.net.Reconcile(a.desiredPods())
	if err != nil {
		a.heldTeardowns.putBack(held)
		return rep, 0, fmt.Errorf("%s: compare host network with records: %w", why, err)
	}
	stray := hostnet.Report{StrayLinks: rep.StrayLinks, StrayRules: rep.StrayRules, StrayRoutes: rep.StrayRoutes}
	n := len(stray.StrayLinks) + len(stray.StrayRules) + len(stray.StrayRoutes)
	if n == 0 {
		releaseHeldTeardowns(held)
		return rep, 0, nil
	}
	if err := a.net.RemoveStray(stray); err != nil {
		a.heldTeardowns.putBack(held)
		return rep, 0, fmt.Errorf("%s: remove stray pod devices: %w", why, err)
	}
	releaseHeldTeardowns(held)
	a.log.Info(why+" removed pod devices no record accounts for",
		"links", len(stray.StrayLinks), "rules", len(stray.StrayRules), "routes", len(stray.StrayRoutes))
	return rep, n, nil
}

// Status is nil while the agent can serve an ADD: it has a free (or
// cooling) address, or the broker is reachable to deliver one. With an
// empty pool and no broker it is cniserver.ErrPoolEmpty, which the plugin
// reports as STATUS code 50 ("cannot serve ADDs") so the runtime stops
// scheduling pods here.
func (a *Agent) Status(context.Context) error {
	if !a.ready.Load() {
		return fmt.Errorf("status: %w", cniserver.ErrNotReady)
	}
	if a.pool.Stats().Available() > 0 {
		return nil
	}
	bs := a.link.Status()
	if bs.Connected {
		return nil
	}
	return fmt.Errorf("status: %w and the broker is unreachable (%s); it can't be refilled", cniserver.ErrPoolEmpty, bs.LastError)
}
