package burst

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim/world"
)

// fakeENIs is an EC2 whose ENIs a test changes by hand.
type fakeENIs struct {
	mu   sync.Mutex
	enis []world.NetworkInterface
}

func (f *fakeENIs) ENIs(context.Context) ([]world.NetworkInterface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]world.NetworkInterface, len(f.enis))
	for i, e := range f.enis {
		e.SecondaryIPs = slices.Clone(e.SecondaryIPs)
		if e.Attachment != nil {
			a := *e.Attachment
			e.Attachment = &a
		}
		out[i] = e
	}
	return out, nil
}

func (f *fakeENIs) change(fn func(enis []world.NetworkInterface) []world.NetworkInterface) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.enis = fn(f.enis)
}

func attachedENI(id, node string, addrs ...string) world.NetworkInterface {
	return world.NetworkInterface{ID: id, SecondaryIPs: addrs,
		Attachment: &world.Attachment{ID: "attach-" + id, InstanceID: node, DeviceIndex: 1, Status: world.AttachmentAttached}}
}

// startWatch runs a watch whose own reads are an hour apart, so every
// read after its first is one a deletion asked for, and waits for that
// first read.
func startWatch(t *testing.T, ec2 *fakeENIs, live *liveSet) *inUseWatch {
	t.Helper()
	w := newInUseWatch(ec2, live, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for {
		w.mu.Lock()
		n := w.polls
		w.mu.Unlock()
		if n > 0 {
			return w
		}
		time.Sleep(time.Millisecond)
	}
}

// TestInUseWatchSeesFreeBeforeDel frees a live pod's address in each way
// EC2 can, then deletes the pod before the watch's next read of its own:
// the read the deletion waits for sees it every time. Sampling alone saw
// none of them (the pod was gone from the live set by the next read), and
// took an address moved to another ENI of the node, or on an ENI
// detaching, for one still there.
func TestInUseWatchSeesFreeBeforeDel(t *testing.T) {
	a := netip.MustParseAddr("10.0.0.10")
	for _, c := range []struct {
		name  string
		free  func([]world.NetworkInterface) []world.NetworkInterface
		freed int
	}{
		{"kept", func(e []world.NetworkInterface) []world.NetworkInterface { return e }, 0},
		{"unassigned", func(e []world.NetworkInterface) []world.NetworkInterface {
			e[0].SecondaryIPs = []string{"10.0.0.11"}
			return e
		}, 1},
		{"moved to another ENI of the node", func(e []world.NetworkInterface) []world.NetworkInterface {
			e[0].SecondaryIPs = []string{"10.0.0.11"}
			e[1].SecondaryIPs = append(e[1].SecondaryIPs, "10.0.0.10")
			return e
		}, 1},
		{"ENI detaching", func(e []world.NetworkInterface) []world.NetworkInterface {
			e[0].Attachment.Status = world.AttachmentDetaching
			return e
		}, 1},
		{"ENI detached and attached again", func(e []world.NetworkInterface) []world.NetworkInterface {
			e[0].Attachment.ID = "attach-again"
			return e
		}, 1},
		{"ENI deleted", func(e []world.NetworkInterface) []world.NetworkInterface { return e[1:] }, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ec2 := &fakeENIs{enis: []world.NetworkInterface{
				attachedENI("eni-1", "i-1", "10.0.0.10", "10.0.0.11"), attachedENI("eni-2", "i-1", "10.0.0.20"),
			}}
			live := newLiveSet()
			live.add(a, "i-1")
			w := startWatch(t, ec2, live)
			ec2.change(c.free)
			w.beforeDel(context.Background(), a)
			if live.len() != 0 {
				t.Errorf("the pod is still in the live set after beforeDel")
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if len(w.freed) != c.freed || w.polls != 2 {
				t.Errorf("%d freed in %d reads, want %d in 2 (problems %q)", len(w.freed), w.polls, c.freed, w.problems)
			}
		})
	}
}

// TestInUseWatchDeletionsShareReads deletes many pods at once: each waits
// for a read begun after it asked, and they share reads rather than
// taking one each.
func TestInUseWatchDeletionsShareReads(t *testing.T) {
	ec2 := &fakeENIs{}
	live := newLiveSet()
	var addrs []string
	for i := range 50 {
		a := netip.AddrFrom4([4]byte{10, 0, 1, byte(i)})
		addrs = append(addrs, a.String())
		live.add(a, "i-1")
	}
	ec2.enis = []world.NetworkInterface{attachedENI("eni-1", "i-1", addrs...)}
	w := startWatch(t, ec2, live)
	var wg sync.WaitGroup
	for _, s := range addrs {
		wg.Go(func() { w.beforeDel(context.Background(), netip.MustParseAddr(s)) })
	}
	wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.freed) != 0 || live.len() != 0 || w.polls < 2 || w.polls > 51 {
		t.Errorf("%d freed, %d still live, %d reads; want 0, 0, 2 to 51", len(w.freed), live.len(), w.polls)
	}
}

// TestCalmCountsReadsFromWarmOnly: EC2 read quiet before the way down gave
// anything up says nothing of what it gave up. The wait for every ENI
// given up to be gone counts only reads begun once the pools were back at
// warm, and starts over at one that finds an ENI detaching; it used to
// take the first quiet read of all, before the first DEL, and report a
// negative time.
func TestCalmCountsReadsFromWarmOnly(t *testing.T) {
	ec2 := &fakeENIs{enis: []world.NetworkInterface{attachedENI("eni-1", "i-1"), attachedENI("eni-2", "i-1")}}
	w := newInUseWatch(ec2, newLiveSet(), time.Hour)
	ctx := context.Background()
	if err := w.poll(ctx); err != nil {
		t.Fatal(err)
	}
	warm := time.Now()
	if since, ok := w.calmSince(warm, 0); ok {
		t.Fatalf("calm since %v with no read begun after warm (%v)", since, warm)
	}
	ec2.change(func(e []world.NetworkInterface) []world.NetworkInterface {
		e[1].Attachment.Status = world.AttachmentDetaching
		return e
	})
	if err := w.poll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.calmSince(warm, 0); ok {
		t.Fatalf("calm with an ENI detaching")
	}
	ec2.change(func(e []world.NetworkInterface) []world.NetworkInterface {
		e[1].Attachment = nil
		return e
	})
	if err := w.poll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.calmSince(warm, 0); ok {
		t.Fatalf("calm with an ENI detached and not deleted")
	}
	ec2.change(func(e []world.NetworkInterface) []world.NetworkInterface { return e[:1] })
	gone := time.Now()
	if err := w.poll(ctx); err != nil {
		t.Fatal(err)
	}
	since, ok := w.calmSince(warm, 0)
	if !ok || since.Before(gone) {
		t.Fatalf("calm since %v (%v), want from the read after the delete (%v)", since, ok, gone)
	}
	// Three simulated seconds of quiet need a read begun that long after.
	if _, ok := w.calmSince(warm, time.Hour); ok {
		t.Errorf("calm for an hour after one read")
	}
}
