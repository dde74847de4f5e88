package daemon

import (
	"context"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/agent/brokerlink/brokertest"
	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
	"github.com/allotnet/allot/agent/pool"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// releaseEnv is an agent against the real broker, holding a few addresses
// (a minimum IP target, so neither side asks for or gives back more), with
// the broker's store at hand to propose and withdraw releases as the
// leader's engine does.
type releaseEnv struct {
	*env
	a  *agentRun
	st *store.Store
}

func newReleaseEnv(t *testing.T, minimum int, dial ...grpc.DialOption) *releaseEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd and the broker engine")
	}
	e := newEnv(t)
	client, st := e.realBrokerWith(dial)
	cfg := e.config()
	cfg.Warm = pool.Targets{MinimumIPs: minimum}
	r := &releaseEnv{env: e, a: e.startOn(cfg, hostnettest.NewRecorder(), client), st: st}
	brokertest.WaitFor(t, 30*time.Second, "the minimum delivered", func() bool {
		return r.a.Pool().Stats().Total >= minimum
	})
	return r
}

// propose records a release proposal of addrs of eniID, as the engine does.
func (r *releaseEnv) propose(eniID string, addrs []netip.Addr) string {
	r.t.Helper()
	var ss []string
	for _, a := range addrs {
		ss = append(ss, a.String())
	}
	rel, err := r.st.ProposeRelease(ctxT(r.t), store.Release{InstanceID: r.inst, ENIID: eniID,
		State: store.ReleaseProposed, Addresses: ss, CreatedAt: time.Now()})
	if err != nil {
		r.t.Fatal(err)
	}
	return rel.ID
}

// onENI returns the pool's addresses on one ENI.
func onENI(a *agentRun, eniID string) []netip.Addr {
	var out []netip.Addr
	for _, ad := range a.Pool().Snapshot().Addresses {
		if ad.ENIID == eniID {
			out = append(out, ad.Addr)
		}
	}
	return out
}

// A release proposal is acknowledged only for addresses that are free right
// now: not held by a pod, not cooling. Acknowledged addresses are never
// handed out, and leave the pool and EC2 once the broker has taken them;
// the held and the cooling one stay in both.
func TestReleaseAckedOnlyForFreeAddresses(t *testing.T) {
	r := newReleaseEnv(t, 4)
	a := r.a
	heldAl := mustAdd(t, a, podReq("held", "a"))
	held := heldAl.Address.Addr()
	cooling := mustAdd(t, a, podReq("gone", "b")).Address.Addr()
	if err := a.Del(ctxT(t), podReq("gone", "b")); err != nil {
		t.Fatal(err)
	}
	all := onENI(a, heldAl.ENIID)
	var free []netip.Addr
	for _, g := range all {
		if g != held && g != cooling {
			free = append(free, g)
		}
	}
	if len(free) == 0 {
		t.Fatalf("no free address beside the held and cooling ones on %s: %v", heldAl.ENIID, all)
	}
	r.propose(heldAl.ENIID, all)
	brokertest.WaitFor(t, 20*time.Second, "released addresses to leave the pool", func() bool {
		left := false
		for _, ad := range a.Pool().Snapshot().Addresses {
			switch {
			case ad.State == checkpoint.Releasing && !slices.Contains(free, ad.Addr):
				t.Fatalf("%v, not free, was set aside for %q", ad.Addr, ad.ReleaseID)
			case !slices.Contains(free, ad.Addr):
			case ad.State == checkpoint.Assigned:
				t.Fatalf("proposed %v was handed out", ad.Addr)
			default:
				left = true // not yet seen, or set aside until the broker takes it
			}
		}
		return !left && a.Pool().Stats().Releasing == 0
	})
	inEC2 := map[netip.Addr]bool{}
	for _, x := range r.sim.World().AllNetworkInterfaces() {
		for _, ip := range x.SecondaryIPs {
			inEC2[netip.MustParseAddr(ip)] = true
		}
	}
	for _, f := range free {
		if inEC2[f] {
			t.Errorf("released %v is still on the ENI in EC2", f)
		}
	}
	if !inEC2[held] || !inEC2[cooling] {
		t.Errorf("EC2 lost the held %v (%v) or the cooling %v (%v)", held, inEC2[held], cooling, inEC2[cooling])
	}
	if _, ok := a.Pool().Get(keyOf(podReq("held", "a").Attachment)); !ok {
		t.Fatal("the held pod lost its allocation")
	}
}

// A release whose ack never reached the broker and that the broker then
// withdrew gives its addresses back to the pool.
func TestWithdrawnReleaseReturnsAddresses(t *testing.T) {
	var failAcks atomic.Bool
	lose := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == allotv1.NodeService_AckRelease_FullMethodName && failAcks.Load() {
			return status.Error(codes.Unavailable, "injected: ack lost")
		}
		return invoke(ctx, method, req, reply, cc, opts...)
	}
	r := newReleaseEnv(t, 2, grpc.WithUnaryInterceptor(lose))
	a := r.a
	s := a.Pool().Snapshot()
	eni := s.Addresses[0].ENIID
	got := onENI(a, eni)[:2]
	failAcks.Store(true)
	id := r.propose(eni, got)
	brokertest.WaitFor(t, 10*time.Second, "addresses set aside for the release", func() bool {
		return a.Pool().Stats().Releasing == 2
	})
	failAcks.Store(false)
	if err := r.st.CancelRelease(ctxT(t), id); err != nil {
		t.Fatal(err)
	}
	brokertest.WaitFor(t, 10*time.Second, "addresses back in the pool", func() bool {
		s := a.Pool().Stats()
		return s.Releasing == 0 && s.Available() >= 2
	})
	mustAdd(t, a, podReq("c1", "a"))
}
