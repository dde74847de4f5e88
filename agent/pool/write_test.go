package pool

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/allotnet/allot/agent/checkpoint"
)

// nodeOnDisk is a pool like a busy node's, writing a real checkpoint in
// dir: five ENIs of 50 addresses, 100 of them held by pods.
func nodeOnDisk(tb testing.TB, dir string) *Pool {
	tb.Helper()
	f := checkpoint.New(filepath.Join(dir, "checkpoint.json"))
	p, err := New(Config{InstanceID: "i-1", Store: f, Cooldown: -1}, checkpoint.State{})
	if err != nil {
		tb.Fatal(err)
	}
	for e := range 5 {
		id := fmt.Sprintf("eni-%d", e)
		if err := p.AddENI(ENI{ID: id, MAC: fmt.Sprintf("02:00:00:00:00:%02x", e), DeviceIndex: e}); err != nil {
			tb.Fatal(err)
		}
		var addrs []netip.Addr
		for i := range 50 {
			addrs = append(addrs, netip.AddrFrom4([4]byte{10, 0, byte(e), byte(10 + i)}))
		}
		if _, err := p.AddCapacity(id, addrs, nil); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range 100 {
		if _, err := p.Add(context.Background(), podKey(i), podInfo); err != nil {
			tb.Fatal(err)
		}
	}
	return p
}

var podInfo = PodInfo{HostVeth: "alt0123456789a", Netns: "/var/run/netns/cni-1234", PodNamespace: "ns", PodName: "pod"}

func podKey(i int) Key { return Key{"allot", fmt.Sprintf("%064d", i), "eth0"} }

// addDel adds and deletes one more pod.
func addDel(tb testing.TB, p *Pool, i int) {
	k := podKey(1000 + i)
	if _, err := p.Add(context.Background(), k, podInfo); err != nil {
		tb.Fatal(err)
	}
	if _, _, err := p.Del(k); err != nil {
		tb.Fatal(err)
	}
}

// A write reuses what it snapshots the pool into, and the checkpoint
// records only the change: an ADD and a DEL on a node of 250 addresses
// allocate a few kilobytes, not two copies of the node's state (the
// snapshot alone is over 50 KB).
func TestWritesReuseTheirSnapshot(t *testing.T) {
	p := nodeOnDisk(t, t.TempDir())
	for i := range 10 { // the buffers grow to the node's size
		addDel(t, p, i)
	}
	const pairs = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range pairs {
		addDel(t, p, 10+i)
	}
	runtime.ReadMemStats(&after)
	perPair := (after.TotalAlloc - before.TotalAlloc) / pairs
	t.Logf("an ADD and a DEL allocated %d bytes", perPair)
	if perPair > 24<<10 {
		t.Fatalf("an ADD and a DEL allocated %d bytes: the write's snapshot or the checkpoint's copies are not reused", perPair)
	}
}

// BenchmarkAddDelOnDisk is an ADD and a DEL on a node of 250 addresses,
// 100 held, with its checkpoint on the test's temporary directory.
func BenchmarkAddDelOnDisk(b *testing.B) {
	p := nodeOnDisk(b, b.TempDir())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		addDel(b, p, i)
	}
}

// randomNode is a valid checkpoint of a node with secondary IPs and /28
// prefixes in every state, some ENIs without addresses.
func randomNode(r *rand.Rand) checkpoint.State {
	st := checkpoint.State{InstanceID: "i-1"}
	states := []checkpoint.AddressState{checkpoint.Free, checkpoint.Cooling, checkpoint.Assigned, checkpoint.Releasing}
	for e := range 1 + r.IntN(4) {
		id := fmt.Sprintf("eni-%d", e)
		st.ENIs = append(st.ENIs, checkpoint.ENI{ID: id, MAC: fmt.Sprintf("02:00:00:00:00:%02x", e), DeviceIndex: e})
		var addrs []checkpoint.Address
		if r.IntN(2) == 0 { // secondary IPs
			for i := range r.IntN(12) {
				addrs = append(addrs, checkpoint.Address{Addr: netip.AddrFrom4([4]byte{10, 0, byte(e), byte(10 + i)})})
			}
		} else { // prefixes
			for k := range r.IntN(3) {
				pfx := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(e), byte(16 * k)}), 28)
				for a, i := pfx.Addr(), 0; i < 16; a, i = a.Next(), i+1 {
					addrs = append(addrs, checkpoint.Address{Addr: a, Prefix: pfx})
				}
			}
		}
		for _, a := range addrs {
			a.ENIID, a.State = id, states[r.IntN(len(states))]
			if a.State == checkpoint.Releasing {
				a.ReleaseID = "rel"
			}
			if a.State == checkpoint.Assigned {
				st.Allocations = append(st.Allocations, checkpoint.Allocation{Network: "n", ContainerID: a.Addr.String(),
					IfName: "eth0", Addr: a.Addr, ENIID: id})
			}
			st.Addresses = append(st.Addresses, a)
		}
	}
	return st
}

// The demand's count of the pool, made without building the views, is the
// views' count (StatsOf) on random nodes, addresses held back included.
func TestStatsMatchTheViews(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 300 {
		st := randomNode(r)
		p, err := New(Config{InstanceID: "i-1"}, st)
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		for _, a := range st.Addresses {
			if a.State == checkpoint.Free && r.IntN(4) == 0 {
				p.heldBack[a.Addr] = true
			}
		}
		p.mu.Lock()
		got, want := p.statsLocked(), StatsOf(p.viewLocked())
		p.mu.Unlock()
		if got != want {
			t.Fatalf("node %d: stats %+v, the views count %+v", i, got, want)
		}
	}
}
