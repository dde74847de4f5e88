package daemon

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/brokerlink/brokertest"
	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
)

// With the broker down, ADDs are served from the pool; STATUS says the node
// is fine while the pool has addresses, and fails once it is empty and
// can't be refilled. When the broker returns, the agent registers again and
// restates its demand.
//
// The agent keeps the test config's MaxAddWait: only the ADD that must
// find the pool empty is bounded short (addWithin). A short MaxAddWait
// would bound c4 too, which needs the address the broker delivers after it
// returned, and on a loaded machine that delivery can come later than a
// short wait after the re-registration this waits for. The ADDs served
// while the broker is down show they did not wait for it by succeeding at
// all: the broker refuses every call until after them, so nothing can
// arrive meanwhile, and each gets one of the addresses delivered before.
func TestBrokerDownAddsServedFromPool(t *testing.T) {
	e := newEnv(t)
	a := e.start(e.config(), hostnettest.NewRecorder())
	before := e.deliver(a, 2)
	e.broker.SetDown(true)
	brokertest.WaitFor(t, 10*time.Second, "the link to notice the broker is down", func() bool {
		return !a.BrokerStatus().Connected
	})
	fromPool := func(pod string, res cniserver.AddResult) {
		t.Helper()
		if !slices.Contains(before, res.Address.Addr()) {
			t.Fatalf("%s got %v with the broker down, want one of the addresses delivered before %v", pod, res.Address, before)
		}
	}
	fromPool("c1", mustAdd(t, a, podReq("c1", "a")))
	if err := a.Status(ctxT(t)); err != nil {
		t.Fatalf("status with a free address and no broker: %v", err)
	}
	fromPool("c2", mustAdd(t, a, podReq("c2", "b")))
	err := a.Status(ctxT(t))
	if !errors.Is(err, cniserver.ErrPoolEmpty) {
		t.Fatalf("status with an empty pool and no broker: %v, want ErrPoolEmpty", err)
	}
	if _, err := addWithin(t, a, podReq("c3", "c"), 200*time.Millisecond); !isPoolEmpty(err) {
		t.Fatalf("third ADD: %v, want pool empty", err)
	}

	registrations := e.broker.Calls("Register")
	// The broker delivers what it is asked for once it is back: the demand
	// the agent restates then still counts the ADD that gave up (its pod is
	// retried), which is what c4 is.
	e.broker.SetAutoDeliver(true)
	e.broker.SetDown(false)
	brokertest.WaitFor(t, 20*time.Second, "re-registration after the broker returned", func() bool {
		return e.broker.Calls("Register") > registrations && a.BrokerStatus().Connected
	})
	if err := a.Status(ctxT(t)); err != nil {
		t.Fatalf("status with the broker back: %v", err)
	}
	if res := mustAdd(t, a, podReq("c4", "d")); slices.Contains(before, res.Address.Addr()) {
		t.Fatalf("c4 got %v, one of the two addresses c1 and c2 hold", res.Address)
	}
}

// Addresses the broker stops listing leave the pool only if no pod holds
// them; a held one is kept (drift) and the pod keeps working.
func TestUnlistedAddressesDroppedOnlyWhenFree(t *testing.T) {
	e := newEnv(t)
	a := e.start(e.config(), hostnettest.NewRecorder())
	got := e.deliver(a, 2)
	held := mustAdd(t, a, podReq("c1", "a")).Address.Addr()
	var all []string
	for _, g := range got {
		all = append(all, g.String())
	}
	e.broker.Forget(e.inst, all)
	brokertest.WaitFor(t, 10*time.Second, "the free unlisted address to leave the pool", func() bool {
		return a.Pool().Stats().Total == 1
	})
	if al, ok := a.Pool().Get(keyOf(podReq("c1", "a").Attachment)); !ok || al.Addr != held {
		t.Fatalf("held address dropped: %+v %v", al, ok)
	}
	// Usage reports leave out what the broker doesn't list (it would refuse
	// the whole report).
	brokertest.WaitFor(t, 10*time.Second, "a usage report without unlisted addresses", func() bool {
		u := e.broker.Usage(e.inst)
		return u != nil && len(u.GetAssigned()) == 0 && len(u.GetFree()) == 0
	})
}
