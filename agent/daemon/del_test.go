package daemon

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/hostnet"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
)

// Same pod name, new sandbox: the old sandbox's DEL arriving after the new
// ADD leaves the new pod's address and network alone.
func TestDelOfOldSandboxSparesNewOne(t *testing.T) {
	e := newEnv(t)
	a := e.start(e.config(), hostnettest.NewRecorder())
	e.deliver(a, 3)
	oldReq, newReq := podReq("sandbox-old", "web-0"), podReq("sandbox-new", "web-0")
	old := mustAdd(t, a, oldReq)
	cur := mustAdd(t, a, newReq)
	if old.Address == cur.Address {
		t.Fatalf("two live sandboxes share %v", cur.Address)
	}
	if err := a.Del(ctxT(t), oldReq); err != nil {
		t.Fatal(err)
	}
	if err := a.Del(ctxT(t), oldReq); err != nil {
		t.Fatalf("repeated DEL: %v", err)
	}
	al, ok := a.Pool().Get(keyOf(newReq.Attachment))
	if !ok || al.Addr != cur.Address.Addr() {
		t.Fatalf("new sandbox's allocation after old DEL: %+v %v, want %v", al, ok, cur.Address)
	}
	if addr, ok := wired(a.net, newReq); !ok || addr != cur.Address.Addr() {
		t.Fatalf("new sandbox's wiring after old DEL: %v %v", addr, ok)
	}
	if _, ok := wired(a.net, oldReq); ok {
		t.Fatal("old sandbox still wired after its DEL")
	}
	// The old address cools down: it is not handed to the next pod.
	next := mustAdd(t, a, podReq("sandbox-3", "web-1"))
	if next.Address == old.Address {
		t.Fatalf("freed address %v reused at once, before its cooldown", old.Address)
	}
	var states []checkpoint.AddressState
	for _, ad := range a.Pool().Snapshot().Addresses {
		if ad.Addr == old.Address.Addr() {
			states = append(states, ad.State)
		}
	}
	if !slices.Equal(states, []checkpoint.AddressState{checkpoint.Cooling}) {
		t.Fatalf("old address states %v, want cooling", states)
	}
}

// A DEL is answered once its release is durable; the teardown runs after,
// and until it is done the address is held back, so it is not handed to
// the next pod while the old veth may still route it. A teardown that
// fails is retried.
func TestDelHoldsAddressBackUntilTeardownDone(t *testing.T) {
	e := newEnv(t)
	net := hostnettest.NewRecorder()
	cfg := e.config()
	cfg.Cooldown = -1
	cfg.MaxAddWait = 100 * time.Millisecond
	a := e.start(cfg, net)
	e.deliver(a, 1)
	req := podReq("c1", "web-0")
	mustAdd(t, a, req)
	for range teardownAttempts - 1 {
		net.FailNext(hostnettest.OpTeardownPod, errors.New("injected: netlink busy"))
	}
	if err := a.Del(ctxT(t), req); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if _, ok := a.Pool().Get(keyOf(req.Attachment)); ok {
		t.Fatal("allocation kept after the DEL was answered")
	}
	disk, err := checkpoint.New(e.checkpointPath()).Load()
	if err != nil || len(disk.Allocations) != 0 {
		t.Fatalf("release not durable when the DEL was answered: %+v %v", disk.Allocations, err)
	}
	// The only address is held back while the teardown is retried.
	if _, err := a.Add(ctxT(t), podReq("c2", "web-1")); !isPoolEmpty(err) {
		t.Fatalf("ADD during the teardown: %v, want the pool empty", err)
	}
	a.WaitTeardowns()
	if n := net.Count(hostnettest.OpTeardownPod); n != teardownAttempts {
		t.Fatalf("%d teardown calls, want %d", n, teardownAttempts)
	}
	if _, ok := wired(net, req); ok {
		t.Fatal("pod still wired after its teardown")
	}
	if a.Pool().HeldBack() != 0 {
		t.Fatal("address still held back after the teardown")
	}
	mustAdd(t, a, podReq("c2", "web-1"))
}

// A teardown that keeps failing keeps the address held back until a GC has
// removed the pieces no record accounts for.
func TestFailedTeardownHeldUntilGC(t *testing.T) {
	e := newEnv(t)
	net := hostnettest.NewRecorder()
	cfg := e.config()
	cfg.Cooldown = -1
	a := e.start(cfg, net)
	e.deliver(a, 1)
	req := podReq("c1", "web-0")
	mustAdd(t, a, req)
	for range teardownAttempts {
		net.FailNext(hostnettest.OpTeardownPod, errors.New("injected: netlink busy"))
	}
	if err := a.Del(ctxT(t), req); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	a.WaitTeardowns()
	if _, ok := wired(net, req); !ok || a.Pool().HeldBack() != 1 {
		t.Fatalf("after every attempt failed: wired %v, held %d; want the pod left and its address held", ok, a.Pool().HeldBack())
	}
	if _, err := a.GC(ctxT(t), cniserver.GCRequest{Network: "allot"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := wired(net, req); ok || a.Pool().HeldBack() != 0 {
		t.Fatalf("after GC: wired %v, held %d", ok, a.Pool().HeldBack())
	}
	mustAdd(t, a, podReq("c2", "web-1"))
}

// A re-ADD of the attachment right after its DEL waits for the teardown
// and wires the pod afresh.
func TestReAddAfterDelWaitsForTeardown(t *testing.T) {
	e := newEnv(t)
	net := hostnettest.NewRecorder()
	cfg := e.config()
	cfg.Cooldown = -1
	a := e.start(cfg, net)
	e.deliver(a, 2)
	req := podReq("c1", "web-0")
	mustAdd(t, a, req)
	net.FailNext(hostnettest.OpTeardownPod, errors.New("injected: netlink busy"))
	if err := a.Del(ctxT(t), req); err != nil {
		t.Fatal(err)
	}
	res := mustAdd(t, a, req)
	if addr, ok := wired(net, req); !ok || addr != res.Address.Addr() {
		t.Fatalf("re-ADD after DEL: wired %v %v, want %v", addr, ok, res.Address)
	}
	if err := a.Check(ctxT(t), req); err != nil {
		t.Fatalf("CHECK after re-ADD: %v", err)
	}
	if a.Pool().HeldBack() != 0 {
		t.Fatal("an address still held back")
	}
}

// A DEL replayed from the plugin's queue doesn't remove an allocation made
// after it was queued.
func TestQueuedDelSparesLaterAdd(t *testing.T) {
	e := newEnv(t)
	a := e.start(e.config(), hostnettest.NewRecorder())
	e.deliver(a, 1)
	req := podReq("c1", "web-0")
	queued := req
	queued.QueuedAt = time.Now().Add(-time.Minute)
	mustAdd(t, a, req)
	if err := a.Del(ctxT(t), queued); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Pool().Get(keyOf(req.Attachment)); !ok {
		t.Fatal("a DEL queued before the ADD removed it")
	}
}

func TestCheck(t *testing.T) {
	e := newEnv(t)
	net := hostnettest.NewRecorder()
	a := e.start(e.config(), net)
	e.deliver(a, 2)
	req := podReq("c1", "web-0")
	res := mustAdd(t, a, req)
	prev := func(addr string) []byte {
		r := &current.Result{CNIVersion: "1.1.0", IPs: []*current.IPConfig{{Address: mustIPNet(t, addr)}}}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ok := req
	ok.PrevResult = prev(res.Address.String())
	if err := a.Check(ctxT(t), ok); err != nil {
		t.Fatalf("check of a healthy pod: %v", err)
	}
	wrong := req
	wrong.PrevResult = prev("10.9.9.9/32")
	if err := a.Check(ctxT(t), wrong); !errors.Is(err, cniserver.ErrCheckFailed) {
		t.Fatalf("check with another address in prevResult: %v, want ErrCheckFailed", err)
	}
	garbage := req
	garbage.PrevResult = []byte("{not json")
	if err := a.Check(ctxT(t), garbage); !errors.Is(err, cniserver.ErrInvalidRequest) {
		t.Fatalf("check with garbage prevResult: %v, want ErrInvalidRequest", err)
	}
	if err := a.Check(ctxT(t), podReq("nobody", "x")); !errors.Is(err, cniserver.ErrUnknownAttachment) {
		t.Fatalf("check of unknown attachment: %v, want ErrUnknownAttachment", err)
	}
	// The pod's wiring disappears behind the agent's back.
	if err := net.TeardownPod(hostnet.PodConfig{Attachment: req.Attachment}); err != nil {
		t.Fatal(err)
	}
	if err := a.Check(ctxT(t), req); !errors.Is(err, cniserver.ErrCheckFailed) {
		t.Fatalf("check of a pod whose wiring is gone: %v, want ErrCheckFailed", err)
	}
}

// GC removes exactly the attachments of its network that are not listed,
// and host devices no record accounts for.
func TestGCRemovesUnlistedAttachmentsAndStrays(t *testing.T) {
	e := newEnv(t)
	net := hostnettest.NewRecorder()
	a := e.start(e.config(), net)
	e.deliver(a, 5)
	keep, drop := podReq("keep", "a"), podReq("drop", "b")
	other := podReq("other-net", "c")
	other.Attachment.Network = "other"
	for _, r := range []cniserver.Request{keep, drop, other} {
		mustAdd(t, a, r)
	}
	// A veth no record accounts for (an agent that lost state once).
	stray := hostnet.PodConfig{Attachment: hostnet.Attachment{Network: "allot", ContainerID: "ghost", IfName: "eth0"},
		NetNS: "/var/run/netns/ghost", Address: mustAddr(t, "10.0.15.250")}
	if _, err := net.SetupPod(stray); err != nil {
		t.Fatal(err)
	}
	removed, err := a.GC(ctxT(t), cniserver.GCRequest{Network: "allot", Valid: []cniserver.Attachment{keep.Attachment}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []cniserver.Attachment{drop.Attachment}) {
		t.Fatalf("gc removed %v, want only %v", removed, drop.Attachment)
	}
	for _, r := range []cniserver.Request{keep, other} {
		if _, ok := a.Pool().Get(keyOf(r.Attachment)); !ok {
			t.Fatalf("gc removed the record of %v", r.Attachment)
		}
		if _, ok := wired(net, r); !ok {
			t.Fatalf("gc removed the wiring of %v", r.Attachment)
		}
	}
	if _, ok := wired(net, drop); ok {
		t.Fatal("gc left the dropped attachment wired")
	}
	for _, p := range net.Pods() {
		if p.Attachment == stray.Attachment {
			t.Fatal("gc left the stray veth")
		}
	}
}

// A restart after a release whose teardown did not happen (a crash between
// the two) removes nothing, but holds back the address the leftover veth
// still routes until a GC removes the veth.
func TestRestartHoldsBackAddressOfLeftoverVeth(t *testing.T) {
	e := newEnv(t)
	net := hostnettest.NewRecorder()
	cfg := e.config()
	cfg.Cooldown = -1
	cfg.MaxAddWait = 100 * time.Millisecond
	first := e.start(cfg, net)
	e.deliver(first, 1)
	req := podReq("c1", "web-0")
	mustAdd(t, first, req)
	for range teardownAttempts {
		net.FailNext(hostnettest.OpTeardownPod, errors.New("injected: the agent dies before its teardown"))
	}
	if err := first.Del(ctxT(t), req); err != nil {
		t.Fatal(err)
	}
	first.WaitTeardowns()
	first.stop()

	second := e.start(cfg, net)
	if n := net.Count(hostnettest.OpTeardownPod) + net.Count(hostnettest.OpRemoveStray); n != teardownAttempts {
		t.Fatalf("restart removed something: %d teardown/remove calls, want the %d failed ones", n, teardownAttempts)
	}
	if _, ok := wired(net, req); !ok || second.Pool().HeldBack() != 1 {
		t.Fatalf("after restart: leftover veth %v, held %d; want it kept and its address held", ok, second.Pool().HeldBack())
	}
	if _, err := second.Add(ctxT(t), podReq("c2", "web-1")); !isPoolEmpty(err) {
		t.Fatalf("ADD while the leftover veth routes the only address: %v, want the pool empty", err)
	}
	if _, err := second.GC(ctxT(t), cniserver.GCRequest{Network: "allot"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := wired(net, req); ok || second.Pool().HeldBack() != 0 {
		t.Fatalf("after GC: leftover veth %v, held %d", ok, second.Pool().HeldBack())
	}
	mustAdd(t, second, podReq("c2", "web-1"))
}
