package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/hostnet"
	"github.com/allotnet/allot/agent/pool"
)

// keyOf is the pool's record key for an attachment. The CNI server checked
// the attachment on the way in (cniserver's one check, by CNI's rules);
// nothing here checks it again.
func keyOf(a cniserver.Attachment) pool.Key {
	return pool.Key{Network: a.Network, ContainerID: a.ContainerID, IfName: a.IfName}
}

// Add gives the attachment an address from the pool — recorded durably
// before the answer — and wires the pod. A new allocation's record is
// written while the pod is wired (AddWiring): the answer waits for both,
// and if the write fails the pod's pieces are removed again before its
// address can go to anyone else. A crash in between leaves a veth no
// record accounts for, whose address a restarted agent holds back until it
// is gone. An empty pool makes it wait (bounded by MaxAddWait) for capacity
// the broker is delivering, then fail with cniserver.ErrPoolEmpty ("try
// again later"). A retried ADD gets the same address. If the pod can't be
// wired, what was set up is torn down and the address goes back to the
// pool; if even the teardown fails, the record stays for the DEL the
// runtime sends after a failed ADD. An ADD of a recorded attachment naming
// another netns is refused (ErrInvalidRequest).
func (a *Agent) Add(ctx context.Context, req cniserver.Request) (res cniserver.AddResult, err error) {
	if !a.ready.Load() {
		return res, fmt.Errorf("add %s: %w", req.Attachment, cniserver.ErrNotReady)
	}
	start := time.Now()
	defer func() { a.tel.request(ctx, "add", start, err) }()
	key := keyOf(req.Attachment)
	unlock := a.keys.lock(key)
	defer unlock()

	assigned := make(chan pool.Allocation, 1)
	taken := make(chan takenAddress, 1)
	go func() {
		var t takenAddress
		t.al, t.unhold, t.err = a.takeAddress(ctx, key, req, assigned)
		taken <- t
	}()
	var t takenAddress
	select {
	case al := <-assigned:
		return a.wireWhileWriting(key, req, al, taken)
	case t = <-taken:
	}
	if t.unhold != nil {
		// The allocation was sent but its write failed before this could
		// wire anything: nothing routes the address.
		t.unhold()
	}
	if t.err != nil {
		return res, addError(req, t.err)
	}
	al := t.al
	if al.Netns != "" && al.Netns != req.NetNS {
		// The same attachment ADDed again naming another netns: CNI allows
		// no second ADD without a DEL, and wiring it would pull the
		// interface out of the pod that has it while the record kept
		// naming that pod's netns. The runtime must DEL it first.
		return res, fmt.Errorf("add %s: %w: the attachment is wired into netns %s, not %s; DEL it before adding it elsewhere",
			req.Attachment, cniserver.ErrInvalidRequest, al.Netns, req.NetNS)
	}
	pc := a.podConfig(al, req.NetNS)
	a.netMu.RLock()
	defer a.netMu.RUnlock()
	pr, err, terr := a.setupPod(pc)
	if err != nil {
		return res, a.setupFailed(key, req, al, err, terr)
	}
	return addResult(al, pr), nil
}

// takenAddress is what the pool answered an ADD.
type takenAddress struct {
	al     pool.Allocation
	unhold func()
	err    error
}

// wireWhileWriting wires the pod for al, a new allocation whose write is
// in flight, and then waits for the write (taken). If the write failed,
// the pod's pieces are removed (retried as a DEL's teardown is) before the
// address's hold ends, and the ADD fails.
func (a *Agent) wireWhileWriting(key pool.Key, req cniserver.Request, al pool.Allocation, taken <-chan takenAddress) (cniserver.AddResult, error) {
	pc := a.podConfig(al, req.NetNS)
	a.netMu.RLock()
	defer a.netMu.RUnlock()
	pr, err, terr := a.setupPod(pc)
	t := <-taken
	if t.err != nil {
		switch {
		case t.unhold == nil:
			// Not expected: the pool holds back every address it sent.
			a.log.Error("address's record failed without a hold", "attachment", req.Attachment.String(), "addr", al.Addr)
		case err != nil && terr == nil:
			t.unhold() // setupPod removed what it had made
		default:
			a.finishTeardown(pc, t.unhold)
		}
		return cniserver.AddResult{}, addError(req, t.err)
	}
	if err != nil {
		return cniserver.AddResult{}, a.setupFailed(key, req, al, err, terr)
	}
	return addResult(al, pr), nil
}

// addError is the ADD's error for what the pool answered.
func addError(req cniserver.Request, err error) error {
	switch {
	case errors.Is(err, pool.ErrNoAddress):
		return fmt.Errorf("add %s: %w; the broker has been told and the runtime should retry: %w",
			req.Attachment, cniserver.ErrPoolEmpty, err)
	case errors.Is(err, pool.ErrInvalidKey):
		return fmt.Errorf("add %s: %w: %w", req.Attachment, cniserver.ErrInvalidRequest, err)
	}
	return fmt.Errorf("add %s: %w", req.Attachment, err)
}

// setupFailed handles a durable allocation whose pod could not be wired:
// the address goes back to the pool once setupPod's teardown (terr) has
// removed what was made; if that failed too, the record stays for the
// runtime's DEL.
func (a *Agent) setupFailed(key pool.Key, req cniserver.Request, al pool.Allocation, err, terr error) error {
	if terr != nil {
		a.log.Error("pod setup failed and so did its teardown; address kept for the runtime's DEL",
			"attachment", req.Attachment.String(), "addr", al.Addr, "err", err, "teardown_err", terr)
	} else if _, _, derr := a.pool.Del(key); derr != nil {
		a.log.Error("pod setup failed; address not returned to the pool", "attachment", req.Attachment.String(),
			"addr", al.Addr, "err", derr)
	}
	return fmt.Errorf("add %s: set up pod network: %w", req.Attachment, hostError(err))
}

func addResult(al pool.Allocation, pr hostnet.PodResult) cniserver.AddResult {
	return cniserver.AddResult{
		Address:      netip.PrefixFrom(al.Addr, 32),
		Gateway:      pr.Gateway,
		HostIfName:   pr.HostVeth,
		HostMAC:      pr.HostVethMAC,
		ContainerMAC: pr.PodMAC,
		ENIID:        al.ENIID,
	}
}

// setupPod wires the pod in a network slot and, if that fails, tears down
// what was set up (terr is that teardown's error). The slot is held for the
// netlink work alone: the checkpoint writes around it must not be bounded
// by it, or a burst of calls would reach the pool's group commit at most
// hostNetParallel at a time.
func (a *Agent) setupPod(pc hostnet.PodConfig) (pr hostnet.PodResult, err, terr error) {
	defer a.netSlots.take()()
	if pr, err = a.net.SetupPod(pc); err != nil {
		terr = a.net.TeardownPod(pc)
	}
	return pr, err, terr
}

// teardownPod removes the pod's host pieces in a network slot.
func (a *Agent) teardownPod(pc hostnet.PodConfig) error {
	defer a.netSlots.take()()
	return a.net.TeardownPod(pc)
}

// takeAddress takes the attachment's address from the pool under a span of
// its own, the one a demand and a delivery for a waiting ADD are made in,
// and records how long the ADD waited for it. A new allocation is sent on
// assigned before it is durable (pool.AddWiring).
func (a *Agent) takeAddress(ctx context.Context, key pool.Key, req cniserver.Request, assigned chan<- pool.Allocation) (pool.Allocation, func(), error) {
	ctx, span := a.tracer().Start(ctx, "allot address")
	defer span.End()
	forget := a.waiting.add(span.SpanContext())
	start := time.Now()
	al, unhold, err := a.pool.AddWiring(ctx, key, pool.PodInfo{
		HostVeth: hostnet.HostVethName(req.Attachment), Netns: req.NetNS,
		PodNamespace: req.PodNamespace, PodName: req.PodName,
	}, assigned)
	forget()
	a.tel.addressWait(ctx, time.Since(start), err)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return al, unhold, err
	}
	span.SetAttributes(attribute.String("allot.address", al.Addr.String()), attribute.String("allot.eni", al.ENIID))
	return al, nil, nil
}

// hostError marks host-network errors that are the request's fault.
func hostError(err error) error {
	if errors.Is(err, hostnet.ErrInvalidConfig) || errors.Is(err, hostnet.ErrNetNSGone) {
		return fmt.Errorf("%w: %w", cniserver.ErrInvalidRequest, err)
	}
	return err
}

// Del frees the attachment's address and tears the pod's network down. It
// answers once the release is durable; the teardown (the kernel's link
// deletion waits out an RCU grace period) finishes in the background,
// holding the attachment's lock, and until it has, the address is held
// back: no ADD gets it and no broker release takes it, so it is never
// handed out while its old veth still routes it. A teardown that keeps
// failing keeps the address held back until CNI GC (or a restart) removes
// the pieces no record accounts for. Del is idempotent, and since the key
// is the attachment, a DEL for an old sandbox of a same-named pod never
// touches the new one. A DEL replayed from the plugin's queue leaves alone
// an allocation made after it was queued.
func (a *Agent) Del(ctx context.Context, req cniserver.Request) (err error) {
	if !a.ready.Load() {
		return fmt.Errorf("del %s: %w", req.Attachment, cniserver.ErrNotReady)
	}
	start := time.Now()
	defer func() { a.tel.request(ctx, "del", start, err) }()
	key := keyOf(req.Attachment)
	unlock := a.keys.lock(key)
	a.netMu.RLock()
	teardown, err := a.delLocked(key, req)
	if teardown == nil {
		a.netMu.RUnlock()
		unlock()
		return err
	}
	a.teardowns.Go(func() {
		defer unlock()
		defer a.netMu.RUnlock()
		teardown()
	})
	return nil
}

// delLocked is Del under the key lock and netMu's read side. For a
// recorded attachment it records the release and returns the teardown
// still to run (under the same locks); otherwise the work is done.
func (a *Agent) delLocked(key pool.Key, req cniserver.Request) (teardown func(), err error) {
	al, ok := a.pool.Get(key)
	if !ok {
		// No record, but host pieces of an attachment are named after it
		// alone, so removing whatever has its name can't touch another pod.
		if err := a.teardownPod(hostnet.PodConfig{Attachment: req.Attachment, NetNS: req.NetNS, MTU: a.cfg.MTU}); err != nil {
			return nil, fmt.Errorf("del %s: tear down unrecorded pod network: %w", req.Attachment, err)
		}
		return nil, nil
	}
	if !req.QueuedAt.IsZero() && al.Created.After(req.QueuedAt) {
		a.log.Info("queued DEL is older than the allocation; left alone", "attachment", req.Attachment.String(),
			"queued_at", req.QueuedAt, "created", al.Created)
		return nil, nil
	}
	netns := req.NetNS
	if netns == "" {
		netns = al.Netns
	}
	pc := a.podConfig(al, netns)
	_, found, unhold, err := a.pool.Release(key)
	if err != nil {
		return nil, fmt.Errorf("del %s: %w", req.Attachment, err)
	}
	if !found {
		return nil, nil
	}
	return func() { a.finishTeardown(pc, unhold) }, nil
}

// Check verifies that the attachment is recorded, that prevResult (when
// sent) names its address, and that every host piece is in place.
func (a *Agent) Check(ctx context.Context, req cniserver.Request) (err error) {
	if !a.ready.Load() {
		return fmt.Errorf("check %s: %w", req.Attachment, cniserver.ErrNotReady)
	}
	start := time.Now()
	defer func() { a.tel.request(ctx, "check", start, err) }()
	key := keyOf(req.Attachment)
	unlock := a.keys.lock(key)
	defer unlock()
	al, ok := a.pool.Get(key)
	if !ok {
		return fmt.Errorf("check %s: %w", req.Attachment, cniserver.ErrUnknownAttachment)
	}
	if len(req.PrevResult) > 0 {
		if err := prevResultHolds(req.PrevResult, al.Addr); err != nil {
			return fmt.Errorf("check %s: %w", req.Attachment, err)
		}
	}
	a.netMu.RLock()
	defer a.netMu.RUnlock()
	release := a.netSlots.take()
	err = a.net.CheckPod(a.podConfig(al, req.NetNS))
	release()
	var ce *hostnet.CheckError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce), errors.Is(err, hostnet.ErrNetNSGone):
		return fmt.Errorf("check %s: %w: %w", req.Attachment, cniserver.ErrCheckFailed, err)
	}
	return fmt.Errorf("check %s: %w", req.Attachment, hostError(err))
}

// prevResultHolds checks that the runtime's prevResult (converted to the
// current spec version by the plugin) holds addr as the pod's /32.
func prevResultHolds(raw []byte, addr netip.Addr) error {
	r, err := current.NewResult(raw)
	if err != nil {
		return fmt.Errorf("%w: prevResult: %v", cniserver.ErrInvalidRequest, err)
	}
	prev, err := current.GetResult(r)
	if err != nil {
		return fmt.Errorf("%w: prevResult: %v", cniserver.ErrInvalidRequest, err)
	}
	// No spec version allows a null entry; the library keeps one as nil.
	if slices.Contains(prev.IPs, nil) || slices.Contains(prev.Interfaces, nil) || slices.Contains(prev.Routes, nil) {
		return fmt.Errorf("%w: prevResult: a list holds null", cniserver.ErrInvalidRequest)
	}
	want := netip.PrefixFrom(addr, 32).String()
	for _, ip := range prev.IPs {
		if ip.Address.String() == want {
			return nil
		}
	}
	return fmt.Errorf("%w: prevResult does not hold the recorded address %s", cniserver.ErrCheckFailed, want)
}
