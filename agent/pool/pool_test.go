package pool

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/checkpoint"
)

func equalStates(a, b checkpoint.State) bool { return reflect.DeepEqual(a, b) }

func TestAddIsIdempotent(t *testing.T) {
	f := newPool(t, Config{})
	f.capacity(t, "eni-0", "10.0.0.11", "10.0.0.12")
	ctx := context.Background()
	a1, err := f.p.Add(ctx, key("c1"), PodInfo{PodName: "web-0", PodNamespace: "default", HostVeth: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := f.p.Add(ctx, key("c1"), PodInfo{PodName: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if a1 != a2 || a2.PodName != "web-0" {
		t.Fatalf("second ADD of the same key: %+v, first %+v", a2, a1)
	}
	if n := len(f.p.Allocations()); n != 1 {
		t.Fatalf("%d allocations, want 1", n)
	}
	// Another interface of the same container is another attachment.
	b, err := f.p.Add(ctx, Key{"allot", "c1", "net1"}, PodInfo{})
	if err != nil || b.Addr == a1.Addr {
		t.Fatalf("net1: %+v, %v", b, err)
	}
	f.checkPersisted(t)
}

func TestAddRejectsIncompleteKey(t *testing.T) {
	f := newPool(t, Config{})
	f.capacity(t, "eni-0", "10.0.0.11")
	for _, k := range []Key{{"n", "", "eth0"}, {"n", "c", ""}} {
		if _, err := f.p.Add(context.Background(), k, PodInfo{}); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("%v: err = %v", k, err)
		}
	}
}

func TestDelIsIdempotent(t *testing.T) {
	f := newPool(t, Config{})
	f.capacity(t, "eni-0", "10.0.0.11")
	al, _ := f.p.Add(context.Background(), key("c1"), PodInfo{HostVeth: "v1"})
	got, found, err := f.p.Del(key("c1"))
	if err != nil || !found || got != al {
		t.Fatalf("Del = %+v %v %v", got, found, err)
	}
	_, saves := f.store.state()
	for range 2 {
		if _, found, err := f.p.Del(key("c1")); err != nil || found {
			t.Fatalf("repeat Del: found=%v err=%v", found, err)
		}
	}
	if _, found, err := f.p.Del(key("never")); err != nil || found {
		t.Fatalf("Del unknown: found=%v err=%v", found, err)
	}
	if _, s := f.store.state(); s != saves {
		t.Fatalf("no-op DELs wrote the checkpoint %d times", s-saves)
	}
	f.checkPersisted(t)
}

// TestNameReuse is the StatefulSet case (docs/architecture.md, rule 2): the
// same pod name comes back in a new sandbox, and the old sandbox's DEL
// arrives after the new ADD.
func TestNameReuse(t *testing.T) {
	f := newPool(t, Config{})
	f.capacity(t, "eni-0", "10.0.0.11", "10.0.0.12")
	ctx := context.Background()
	pod := PodInfo{PodNamespace: "db", PodName: "pg-0"}
	old, _ := f.p.Add(ctx, key("sandbox-old"), pod)
	cur, err := f.p.Add(ctx, key("sandbox-new"), pod)
	if err != nil || cur.Addr == old.Addr {
		t.Fatalf("new sandbox: %+v, %v", cur, err)
	}
	if _, found, _ := f.p.Del(key("sandbox-old")); !found {
		t.Fatal("old sandbox's DEL found nothing")
	}
	// Again, late and repeated.
	f.p.Del(key("sandbox-old"))
	got, ok := f.p.Get(key("sandbox-new"))
	if !ok || got != cur {
		t.Fatalf("new sandbox lost its address: %+v %v", got, ok)
	}
	if len(f.p.Allocations()) != 1 {
		t.Fatalf("allocations: %+v", f.p.Allocations())
	}
}

func TestCooldown(t *testing.T) {
	f := newPool(t, Config{Cooldown: 30 * time.Second})
	f.capacity(t, "eni-0", "10.0.0.11")
	ctx := context.Background()
	a, _ := f.p.Add(ctx, key("c1"), PodInfo{})
	f.p.Del(key("c1"))

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err := f.p.Add(short, key("c2"), PodInfo{})
	cancel()
	if !errors.Is(err, ErrNoAddress) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ADD during cooldown: %v, want ErrNoAddress", err)
	}
	if f.p.Pending() != 0 {
		t.Fatalf("pending %d after the ADD gave up", f.p.Pending())
	}
	if s := f.p.Stats(); s.Cooling != 1 || s.Available() != 1 {
		t.Fatalf("stats during cooldown: %+v", s)
	}

	// An ADD waiting only for the cooldown gets the address when it ends.
	done := make(chan Allocation)
	go func() {
		al, err := f.p.Add(ctx, key("c3"), PodInfo{})
		if err != nil {
			t.Error(err)
		}
		done <- al
	}()
	waitFor(t, func() bool { return f.p.Pending() == 1 })
	f.clock.Advance(29 * time.Second)
	select {
	case al := <-done:
		t.Fatalf("address reused after 29s: %+v", al)
	case <-time.After(20 * time.Millisecond):
	}
	f.clock.Advance(time.Second)
	if al := <-done; al.Addr != a.Addr {
		t.Fatalf("got %s, want %s", al.Addr, a.Addr)
	}
	f.checkPersisted(t)
}

func TestDefaultCooldownAndNone(t *testing.T) {
	f := newPool(t, Config{})
	f.capacity(t, "eni-0", "10.0.0.11")
	f.p.Add(context.Background(), key("c1"), PodInfo{})
	f.p.Del(key("c1"))
	if s := f.p.Snapshot(); s.Addresses[0].CoolUntil != f.clock.Now().Add(DefaultCooldown) {
		t.Fatalf("cool until %v", s.Addresses[0].CoolUntil)
	}

	g := newPool(t, Config{Cooldown: -1})
	g.capacity(t, "eni-0", "10.0.0.11")
	g.p.Add(context.Background(), key("c1"), PodInfo{})
	g.p.Del(key("c1"))
	if _, err := g.p.Add(context.Background(), key("c2"), PodInfo{}); err != nil {
		t.Fatalf("no cooldown: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never became true")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestAddWaitsForCapacity(t *testing.T) {
	f := newPool(t, Config{})
	lim := Limits{MaxENIs: 3, IPv4PerENI: 10}
	done := make(chan error, 2)
	for _, c := range []string{"c1", "c2"} {
		go func() {
			_, err := f.p.Add(context.Background(), key(c), PodInfo{})
			done <- err
		}()
	}
	waitFor(t, func() bool { return f.p.Pending() == 2 })
	if d := f.p.Demand(Targets{WarmIPs: 1}, lim); d.Pending != 2 || d.WarmShortfall != 1 {
		t.Fatalf("demand while waiting: %+v", d)
	}
	select {
	case <-f.p.Changed():
	default:
		t.Fatal("no change signalled for the waiting ADDs")
	}
	f.capacity(t, "eni-1", "10.0.1.11", "10.0.1.12", "10.0.1.13")
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if f.p.Pending() != 0 {
		t.Fatalf("pending %d", f.p.Pending())
	}
	f.checkPersisted(t)
}

func TestAddMaxWait(t *testing.T) {
	f := newPool(t, Config{MaxWait: 30 * time.Millisecond})
	_, err := f.p.Add(context.Background(), key("c1"), PodInfo{})
	if !errors.Is(err, ErrNoAddress) {
		t.Fatalf("err = %v", err)
	}
	if f.p.Pending() != 0 {
		t.Fatal("pending not cleared")
	}
	// A cancelled context fails at once too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.p.Add(ctx, key("c2"), PodInfo{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestPickPacks(t *testing.T) {
	p0 := netip.MustParsePrefix("10.0.8.0/28")
	p1 := netip.MustParsePrefix("10.0.8.16/28")
	st := checkpoint.State{InstanceID: instance, ENIs: []checkpoint.ENI{
		{ID: "eni-0", MAC: eni0.MAC, DeviceIndex: 0, Primary: true},
		{ID: "eni-1", MAC: eni1.MAC, DeviceIndex: 1},
	}}
	for _, p := range []struct {
		pfx netip.Prefix
		eni string
	}{{p0, "eni-0"}, {p1, "eni-1"}} {
		for a := p.pfx.Addr(); p.pfx.Contains(a); a = a.Next() {
			st.Addresses = append(st.Addresses, checkpoint.Address{Addr: a, ENIID: p.eni, Prefix: p.pfx, State: checkpoint.Free})
		}
	}
	// One pod already on p1 (the second ENI).
	st.Addresses[16].State = checkpoint.Assigned
	st.Allocations = []checkpoint.Allocation{{Network: "allot", ContainerID: "c0", IfName: "eth0", Addr: p1.Addr(), ENIID: "eni-1"}}
	p, err := New(Config{InstanceID: instance, Clock: newFakeClock()}, st)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 15 {
		al, err := p.Add(ctx, key(string(rune('a'+i))), PodInfo{})
		if err != nil || !p1.Contains(al.Addr) {
			t.Fatalf("pick %d: %s (%v), want %s filled first so %s stays whole", i, al.Addr, err, p1, p0)
		}
	}
	al, _ := p.Add(ctx, key("z"), PodInfo{})
	if al.Addr != p0.Addr() {
		t.Fatalf("after %s is full: %s, want %s", p1, al.Addr, p0.Addr())
	}
}

func TestAddCapacity(t *testing.T) {
	f := newPool(t, Config{})
	n, err := f.p.AddCapacity("eni-0", ips("10.0.0.10", "10.0.0.11", "10.0.0.11"), []netip.Prefix{netip.MustParsePrefix("10.0.9.5/28")})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1+16 {
		t.Fatalf("added %d, want 17 (primary IP skipped, duplicate once, prefix expanded)", n)
	}
	al, _ := f.p.Add(context.Background(), key("c1"), PodInfo{})
	// Re-adding the same capacity changes nothing: the assigned address stays.
	if n, err := f.p.AddCapacity("eni-0", ips(al.Addr.String(), "10.0.0.11"), nil); err != nil || n != 0 {
		t.Fatalf("re-add: %d, %v", n, err)
	}
	if got, _ := f.p.Get(key("c1")); got != al {
		t.Fatalf("allocation changed: %+v", got)
	}
	assigned, _ := f.p.Usage()
	if !slices.Equal(assigned, []netip.Addr{al.Addr}) {
		t.Fatalf("assigned %v", assigned)
	}
	if _, err := f.p.AddCapacity("eni-1", ips("10.0.0.11"), nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflict: %v", err)
	}
	if _, err := f.p.AddCapacity("eni-9", ips("10.0.5.1"), nil); !errors.Is(err, ErrUnknownENI) {
		t.Fatalf("unknown eni: %v", err)
	}
	if _, err := f.p.AddCapacity("eni-1", nil, []netip.Prefix{netip.MustParsePrefix("10.0.10.0/27")}); err == nil {
		t.Fatal("a /27 was accepted as a prefix")
	}
	f.checkPersisted(t)
}

func TestRemoveENIAndRetain(t *testing.T) {
	f := newPool(t, Config{Cooldown: -1})
	f.capacity(t, "eni-1", "10.0.1.11", "10.0.1.12", "10.0.1.13")
	f.capacity(t, "eni-0", "10.0.0.11")
	ctx := context.Background()
	f.p.Add(ctx, key("c0"), PodInfo{})          // 10.0.0.11 (device 0 first)
	al, _ := f.p.Add(ctx, key("c1"), PodInfo{}) // on eni-1
	if al.ENIID != "eni-1" {
		t.Fatalf("c1 on %s", al.ENIID)
	}
	if err := f.p.RemoveENI("eni-1"); !errors.Is(err, ErrInUse) {
		t.Fatalf("RemoveENI with a pod: %v", err)
	}
	dropped, drift, err := f.p.Retain("eni-1", ips("10.0.1.12"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(drift, []netip.Addr{al.Addr}) {
		t.Fatalf("drift %v, want %s (assigned but not in the broker's record)", drift, al.Addr)
	}
	if len(dropped) != 1 || dropped[0] == al.Addr {
		t.Fatalf("dropped %v", dropped)
	}
	f.p.Del(key("c1"))
	if err := f.p.RemoveENI("eni-1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.p.ENI("eni-1"); ok {
		t.Fatal("eni-1 still there")
	}
	if s := f.p.Stats(); s.Total != 1 || s.ENIs != 1 {
		t.Fatalf("stats %+v", s)
	}
	f.checkPersisted(t)
}

func TestPersistFailureRollsBack(t *testing.T) {
	f := newPool(t, Config{})
	f.capacity(t, "eni-0", "10.0.0.11", "10.0.0.12")
	ctx := context.Background()
	al, _ := f.p.Add(ctx, key("c1"), PodInfo{})
	before := f.p.Snapshot()

	f.store.setFail(true)
	if _, err := f.p.Add(ctx, key("c2"), PodInfo{}); !errors.Is(err, errDiskFull) {
		t.Fatalf("Add: %v", err)
	}
	if _, _, err := f.p.Del(key("c1")); !errors.Is(err, errDiskFull) {
		t.Fatalf("Del: %v", err)
	}
	if _, err := f.p.ProposeRelease("r", ips("10.0.0.12"), nil); !errors.Is(err, errDiskFull) {
		t.Fatalf("ProposeRelease: %v", err)
	}
	if _, err := f.p.AddCapacity("eni-0", ips("10.0.0.13"), nil); !errors.Is(err, errDiskFull) {
		t.Fatalf("AddCapacity: %v", err)
	}
	if _, err := f.p.NextUsageSeq(); !errors.Is(err, errDiskFull) {
		t.Fatalf("NextUsageSeq: %v", err)
	}
	if err := f.p.AddENI(ENI{ID: "eni-2", DeviceIndex: 2}); !errors.Is(err, errDiskFull) {
		t.Fatalf("AddENI: %v", err)
	}
	if after := f.p.Snapshot(); !reflect.DeepEqual(after, before) {
		t.Fatalf("failed operations changed the pool:\n%+v\n%+v", after, before)
	}
	f.store.setFail(false)
	if got, ok := f.p.Get(key("c1")); !ok || got != al {
		t.Fatal("allocation lost")
	}
	if _, err := f.p.Add(ctx, key("c2"), PodInfo{}); err != nil {
		t.Fatal(err)
	}
	f.checkPersisted(t)

	// The same when changes share writes: an ADD whose write fails, and
	// behind it a batch of two ADDs, a DEL and a usage sequence whose
	// write fails too. Every one fails and the pool is as it was.
	f.capacity(t, "eni-0", "10.0.0.13", "10.0.0.14", "10.0.0.15")
	before = f.p.Snapshot()
	g := f.store.hold()
	adds := make(chan addResult, 3)
	goAdd(f, "c3", adds)
	recv(t, g.saving)
	goAdd(f, "c4", adds)
	goAdd(f, "c5", adds)
	delErr, seqErr := make(chan error, 1), make(chan error, 1)
	go func() { _, _, err := f.p.Del(key("c1")); delErr <- err }()
	go func() { _, err := f.p.NextUsageSeq(); seqErr <- err }()
	waitFor(t, func() bool {
		s := f.p.Snapshot()
		return len(s.Allocations) == 4 && s.UsageSeq == before.UsageSeq+UsageSeqBlock
	})
	g.finish <- errDiskFull
	if r := recv(t, adds); r.key != key("c3") || !errors.Is(r.err, errDiskFull) {
		t.Fatalf("first write: %+v", r)
	}
	if st := recv(t, g.saving); !slices.Equal(containerIDs(st), []string{"c2", "c4", "c5"}) {
		t.Fatalf("second write holds %v, want c2, c4, c5 (not the undone c3, nor the deleted c1)", containerIDs(st))
	}
	g.finish <- errDiskFull
	for range 2 {
		if r := recv(t, adds); !errors.Is(r.err, errDiskFull) {
			t.Fatalf("Add in the batch: %+v", r)
		}
	}
	if err := recv(t, delErr); !errors.Is(err, errDiskFull) {
		t.Fatalf("Del in the batch: %v", err)
	}
	if err := recv(t, seqErr); !errors.Is(err, errDiskFull) {
		t.Fatalf("NextUsageSeq in the batch: %v", err)
	}
	f.store.release()
	if after := f.p.Snapshot(); !reflect.DeepEqual(after, before) {
		t.Fatalf("failed batch changed the pool:\n%+v\n%+v", after, before)
	}
	for _, c := range []string{"c3", "c4", "c5"} {
		if _, err := f.p.Add(ctx, key(c), PodInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	f.checkPersisted(t)
}

// TestRestart drives a pool backed by a real checkpoint file, then starts a
// new pool from what the file holds: every attachment, cooldown, release and
// the usage sequence survive, and a retried ADD gets the same address.
func TestRestart(t *testing.T) {
	clock := newFakeClock()
	file := checkpoint.New(filepath.Join(t.TempDir(), "pool.json"))
	cfg := Config{InstanceID: instance, Clock: clock, Store: file}
	p, err := New(cfg, checkpoint.State{})
	if err != nil {
		t.Fatal(err)
	}
	p.AddENI(eni0)
	p.AddENI(eni1)
	p.AddCapacity("eni-0", ips("10.0.0.11", "10.0.0.12", "10.0.0.13"), nil)
	p.AddCapacity("eni-1", nil, []netip.Prefix{netip.MustParsePrefix("10.0.7.0/28")})
	ctx := context.Background()
	a1, _ := p.Add(ctx, key("c1"), PodInfo{PodName: "a", HostVeth: "veth1", Netns: "/proc/1/ns/net"})
	p.Add(ctx, key("c2"), PodInfo{})
	p.Del(key("c2")) // cooling
	if _, err := p.ProposeRelease("rel-1", nil, []netip.Prefix{netip.MustParsePrefix("10.0.7.0/28")}); err != nil {
		t.Fatal(err)
	}
	seq, _ := p.NextUsageSeq()
	want := p.Snapshot()

	st, err := file.Load()
	if err != nil {
		t.Fatal(err)
	}
	q, err := New(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored state differs:\n got %+v\nwant %+v", got, want)
	}
	if got, _ := q.Add(ctx, key("c1"), PodInfo{}); got != a1 {
		t.Fatalf("retried ADD after restart: %+v, want %+v", got, a1)
	}
	if next, _ := q.NextUsageSeq(); next <= seq || next > seq+UsageSeqBlock {
		t.Fatalf("usage seq %d after a restart, want one in (%d, %d]", next, seq, seq+UsageSeqBlock)
	}
	// The cooling address stays cooling, the releasing prefix stays out.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	b, _ := q.Add(short, key("c9"), PodInfo{})
	if b.Addr != netip.MustParseAddr("10.0.0.13") {
		t.Fatalf("after restart got %s, want the only free address 10.0.0.13", b.Addr)
	}

	if _, err := New(Config{InstanceID: "i-other"}, st); !errors.Is(err, ErrWrongInstance) {
		t.Fatalf("other instance: %v", err)
	}
	bad := st
	bad.Allocations = nil
	if _, err := New(cfg, bad); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Fatalf("inconsistent state: %v", err)
	}
}

func TestUsageAndDemand(t *testing.T) {
	f := newPool(t, Config{})
	f.capacity(t, "eni-0", "10.0.0.11", "10.0.0.12", "10.0.0.13")
	ctx := context.Background()
	f.p.Add(ctx, key("c1"), PodInfo{})
	f.p.Add(ctx, key("c2"), PodInfo{})
	f.p.Del(key("c2"))
	assigned, free := f.p.Usage()
	if !slices.Equal(assigned, ips("10.0.0.11")) || !slices.Equal(free, ips("10.0.0.12", "10.0.0.13")) {
		t.Fatalf("usage %v %v", assigned, free)
	}
	d := f.p.Demand(Targets{WarmIPs: 5}, m5large)
	if d.Pending != 0 || d.WarmShortfall != 3 {
		t.Fatalf("demand %+v", d)
	}
	// .12 is cooling: it counts as free, as aws-vpc-cni counts it, so one
	// of the two is excess; a proposal of .12 would not be agreed to
	// (TestReleaseHandshake).
	if n := Excess(Targets{WarmIPs: 1}, m5large, len(assigned), len(free)); n != 1 {
		t.Fatalf("excess %d, want 1", n)
	}
}

// TestDemandCountsArrivingADDs: ADDs queued behind the pool's lock (another
// ADD's checkpoint write holds it) are demand already. Of five arriving
// ADDs, the two free addresses serve two; three are pending, and the warm
// target is measured on what the arrivals leave free (none).
func TestDemandCountsArrivingADDs(t *testing.T) {
	f := newPool(t, Config{})
	f.capacity(t, "eni-0", "10.0.0.11", "10.0.0.12")
	lim := Limits{MaxENIs: 3, IPv4PerENI: 10}
	f.p.mu.Lock() // as a checkpoint write in progress would
	done := make(chan error, 5)
	for i := range 5 {
		go func() {
			_, err := f.p.Add(context.Background(), key(fmt.Sprintf("c%d", i)), PodInfo{})
			done <- err
		}()
	}
	waitFor(t, func() bool { return f.p.arriving.Load() == 5 })
	d := f.p.demandLocked(Targets{WarmIPs: 1}, lim)
	f.p.mu.Unlock()
	if d.Pending != 3 || d.WarmShortfall != 1 {
		t.Fatalf("demand with 5 ADDs arriving on 2 free addresses: %+v; want pending 3, warm shortfall 1", d)
	}
	// Once they are through, the count is the waiting ones as before.
	waitFor(t, func() bool { return f.p.Pending() == 3 })
	if d := f.p.Demand(Targets{WarmIPs: 1}, lim); d.Pending != 3 || d.WarmShortfall != 1 {
		t.Fatalf("demand with 3 waiting: %+v", d)
	}
	f.capacity(t, "eni-1", "10.0.1.11", "10.0.1.12", "10.0.1.13", "10.0.1.14")
	for range 5 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := f.p.arriving.Load(); n != 0 {
		t.Fatalf("arriving = %d after every ADD returned", n)
	}
	if d := f.p.Demand(Targets{WarmIPs: 1}, lim); d.Pending != 0 || d.WarmShortfall != 0 {
		t.Fatalf("demand after: %+v", d)
	}
}

// TestDemandLingersForRetry: an ADD that gave up waiting still counts as
// Pending for RetryLinger, because kubelet retries its pod with a new
// sandbox; the retry takes its place rather than adding to it, and the
// count goes once RetryLinger has passed.
func TestDemandLingersForRetry(t *testing.T) {
	f := newPool(t, Config{RetryLinger: time.Minute})
	lim := Limits{MaxENIs: 3, IPv4PerENI: 10}
	tg := Targets{WarmIPs: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := f.p.Add(ctx, key("c1"), PodInfo{}); !errors.Is(err, ErrNoAddress) {
		t.Fatalf("ADD on an empty pool: %v, want ErrNoAddress", err)
	}
	if d := f.p.Demand(tg, lim); d.Pending != 1 {
		t.Fatalf("after the ADD gave up: pending %d, want 1", d.Pending)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.p.Add(rctx, key("c1-retry"), PodInfo{})
		done <- err
	}()
	waitFor(t, func() bool { return f.p.Pending() == 1 })
	if d := f.p.Demand(tg, lim); d.Pending != 1 {
		t.Fatalf("while the retry waits: pending %d, want 1 (the retry replaces the one that gave up)", d.Pending)
	}
	rcancel()
	if err := <-done; !errors.Is(err, ErrNoAddress) {
		t.Fatalf("cancelled retry: %v", err)
	}
	if d := f.p.Demand(tg, lim); d.Pending != 1 {
		t.Fatalf("after the retry gave up too: pending %d, want 1", d.Pending)
	}
	f.clock.Advance(time.Minute)
	if d := f.p.Demand(tg, lim); d.Pending != 0 {
		t.Fatalf("RetryLinger after: pending %d, want 0", d.Pending)
	}
}

// TestDemandWithinRoom: the warm shortfall asks only for the room the
// waiting pods leave on the node. With 2 of a node's 3 addresses in the
// pool and 5 ADDs arriving, 3 wait and the one address left is theirs:
// no warm shortfall, so the broker does not find the node full for it.
func TestDemandWithinRoom(t *testing.T) {
	f := newPool(t, Config{})
	f.capacity(t, "eni-0", "10.0.0.11", "10.0.0.12")
	lim := Limits{MaxENIs: 1, IPv4PerENI: 4}
	f.p.mu.Lock()
	f.p.arriving.Add(5)
	d := f.p.demandLocked(Targets{WarmIPs: 1}, lim)
	f.p.arriving.Add(-5)
	f.p.mu.Unlock()
	if d.Pending != 3 || d.WarmShortfall != 0 {
		t.Fatalf("demand with 5 ADDs on 2 of 3 addresses: %+v; want pending 3, no warm shortfall", d)
	}
	// With room to spare the warm target is asked for as before.
	if d := f.p.Demand(Targets{WarmIPs: 1}, Limits{MaxENIs: 2, IPv4PerENI: 4}); d.Pending != 0 || d.WarmShortfall != 0 {
		t.Fatalf("demand with 2 free addresses: %+v", d)
	}
	f.p.mu.Lock()
	f.p.arriving.Add(3)
	d = f.p.demandLocked(Targets{WarmIPs: 1}, Limits{MaxENIs: 2, IPv4PerENI: 4})
	f.p.arriving.Add(-3)
	f.p.mu.Unlock()
	if d.Pending != 1 || d.WarmShortfall != 1 {
		t.Fatalf("demand with 3 ADDs on 2 of 6 addresses: %+v; want pending 1, warm shortfall 1", d)
	}
}
