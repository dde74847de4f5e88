package daemon

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/brokerlink/brokertest"
	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/hostnet"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
	"google.golang.org/grpc/codes"
)

// An ADD on an empty pool tells the broker it is waiting, and succeeds with
// the address the broker then delivers.
func TestAddOnEmptyPoolWaitsForDelivery(t *testing.T) {
	e := newEnv(t)
	a := e.start(e.config(), hostnettest.NewRecorder())
	e.registered()

	type result struct {
		res cniserver.AddResult
		err error
	}
	done := make(chan result, 1)
	req := podReq("c1", "web-0")
	go func() {
		res, err := a.Add(ctxT(t), req)
		done <- result{res, err}
	}()
	brokertest.WaitFor(t, 10*time.Second, "demand with one waiting ADD", func() bool {
		d := e.broker.Demand(e.inst)
		return d != nil && d.GetPending() == 1
	})
	select {
	case r := <-done:
		t.Fatalf("ADD returned before anything was delivered: %+v %v", r.res, r.err)
	default:
	}
	got, err := e.broker.Deliver(e.inst, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("add: %v", r.err)
	}
	if want := netip.MustParsePrefix(got[0] + "/32"); r.res.Address != want {
		t.Fatalf("address %v, want the delivered %v", r.res.Address, want)
	}
	if addr, ok := wired(a.net, req); !ok || addr != r.res.Address.Addr() {
		t.Fatalf("recorder wired %v (%v), want %v", addr, ok, r.res.Address.Addr())
	}
	prim, _ := a.Identity().Primary()
	if r.res.ENIID != prim.ENIID || r.res.Gateway != hostnet.PodGateway || r.res.HostIfName != hostnet.HostVethName(req.Attachment) {
		t.Fatalf("result %+v: want ENI %s, gateway %v, host veth named after the attachment", r.res, prim.ENIID, hostnet.PodGateway)
	}
	brokertest.WaitFor(t, 10*time.Second, "demand back to no waiting ADD", func() bool {
		return e.broker.Demand(e.inst).GetPending() == 0
	})
	brokertest.WaitFor(t, 10*time.Second, "usage report naming the pod's address", func() bool {
		u := e.broker.Usage(e.inst)
		return u != nil && slices.Equal(u.GetAssigned(), []string{got[0]})
	})
}

// When nothing arrives within the bounded wait, the ADD fails with the
// error the plugin turns into CNI code 11, and leaves nothing behind.
func TestAddOnEmptyPoolFailsTryAgainLater(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.MaxAddWait = 300 * time.Millisecond
	a := e.start(cfg, hostnettest.NewRecorder())
	e.registered()

	_, err := a.Add(ctxT(t), podReq("c1", "web-0"))
	if !isPoolEmpty(err) || cniserver.Code(err) != codes.ResourceExhausted {
		t.Fatalf("add on empty pool: %v (code %v), want ErrPoolEmpty / ResourceExhausted", err, cniserver.Code(err))
	}
	if n := len(a.Pool().Allocations()); n != 0 || a.Pool().Pending() != 0 {
		t.Fatalf("after a failed ADD: %d allocations, %d pending; want none", n, a.Pool().Pending())
	}
	if got := a.net.Count(hostnettest.OpSetupPod); got != 0 {
		t.Fatalf("SetupPod called %d times for an ADD that got no address", got)
	}
}

// A retried ADD of the same attachment gets the same address and wiring.
func TestAddIsIdempotent(t *testing.T) {
	e := newEnv(t)
	a := e.start(e.config(), hostnettest.NewRecorder())
	e.deliver(a, 3)
	req := podReq("c1", "web-0")
	first := mustAdd(t, a, req)
	again := mustAdd(t, a, req)
	if first != again {
		t.Fatalf("retried ADD: %+v, first %+v", again, first)
	}
	if n := len(a.Pool().Allocations()); n != 1 {
		t.Fatalf("%d allocations after a retried ADD, want 1", n)
	}
	if n := len(a.net.Pods()); n != 1 {
		t.Fatalf("%d pods wired after a retried ADD, want 1", n)
	}
}

// When the pod can't be wired, its address goes back to the pool.
func TestAddSetupFailureReturnsAddress(t *testing.T) {
	e := newEnv(t)
	net := hostnettest.NewRecorder()
	cfg := e.config()
	cfg.Cooldown = -1
	a := e.start(cfg, net)
	e.deliver(a, 1)
	net.FailNext(hostnettest.OpSetupPod, errors.New("injected: veth create failed"))
	if _, err := a.Add(ctxT(t), podReq("c1", "web-0")); err == nil {
		t.Fatal("add succeeded though SetupPod failed")
	}
	if n := len(a.Pool().Allocations()); n != 0 {
		t.Fatalf("%d allocations after a failed setup, want 0", n)
	}
	if s := a.Pool().Stats(); s.Available() != 1 {
		t.Fatalf("pool after failed setup: %+v, want its one address available again", s)
	}
	mustAdd(t, a, podReq("c2", "web-1"))
}
