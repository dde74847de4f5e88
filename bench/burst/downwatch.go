package burst

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"sync"
	"time"

	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/awssim/world"
)

// liveSet is the harness's record of which pods hold which address right
// now: an address enters when its pod's ADD returns and leaves before its
// pod's DEL is sent. Every entry has its own sequence number, so an
// address that leaves and comes back (another pod) is a new holding.
type liveSet struct {
	mu  sync.Mutex
	seq uint64
	m   map[netip.Addr]holding
}

// holding is one pod's hold of an address: the node it is on.
type holding struct {
	node string
	seq  uint64
}

func newLiveSet() *liveSet { return &liveSet{m: map[netip.Addr]holding{}} }

func (l *liveSet) add(a netip.Addr, node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	l.m[a] = holding{node: node, seq: l.seq}
}

func (l *liveSet) remove(a netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, a)
}

func (l *liveSet) snapshot() map[netip.Addr]holding {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.m)
}

// len is how many addresses live pods hold.
func (l *liveSet) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// still reports whether the holding is unchanged.
func (l *liveSet) still(a netip.Addr, h holding) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[a] == h
}

// enisReader is what the watch reads of awssim: every ENI in the account.
type enisReader interface {
	ENIs(ctx context.Context) ([]world.NetworkInterface, error)
}

// place is where EC2 has an address: on which ENI, under which attachment,
// on which node. Only an ENI attached (not detaching) puts its addresses
// on a node.
type place struct{ node, eni, attachment string }

// inUseWatch checks that EC2 never frees an address a live pod holds.
// Each read of EC2's ENIs checks every address a pod held both before the
// read and after it: it must be on an attached ENI of the pod's node, and
// on the same ENI and attachment as when a read first saw it (an address
// unassigned and put back elsewhere, or whose ENI was detached and
// attached again, was freed in between). Reads come every interval, and
// one more whenever a pod is about to be deleted (beforeDel): its pod
// leaves the live set only after a read that began after the harness chose
// to delete it, and its DEL goes only then, so the pod held the address
// until that read, and an address freed while it held it is missing from
// it or elsewhere. The one event no read can tell is the same address
// unassigned and assigned again to the same ENI in between: awssim hands
// out a subnet's addresses in turn (next-fit), so an address comes back
// only after the rest of its /16 was handed out.
type inUseWatch struct {
	admin    enisReader
	live     *liveSet
	interval time.Duration
	// kick asks run for a read now (beforeDel); buffered, size 1.
	kick chan struct{}

	mu       sync.Mutex
	polls    int
	checks   int64
	freed    map[holding]bool
	seen     map[holding]place
	problems []string
	// next is the read the pods waiting in beforeDel wait for; run takes
	// it before that read begins. stopped: run returned, no more reads.
	next    *pendingRead
	stopped bool
	// calm is when the current run of reads finding every ENI attached
	// (none detaching, none detached waiting for its delete) began, zero
	// when the last read found one; calmRead when the last of them began.
	calm, calmRead time.Time
}

// pendingRead is one read some pods' deletions wait for.
type pendingRead struct {
	done chan struct{}
	err  error
}

func newInUseWatch(admin enisReader, live *liveSet, interval time.Duration) *inUseWatch {
	return &inUseWatch{admin: admin, live: live, interval: interval, kick: make(chan struct{}, 1),
		freed: map[holding]bool{}, seen: map[holding]place{}}
}

// run reads every interval, and at once when a deletion waits, until ctx
// ends.
func (w *inUseWatch) run(ctx context.Context) {
	defer func() {
		w.mu.Lock()
		next := w.next
		w.next, w.stopped = nil, true
		w.mu.Unlock()
		if next != nil {
			next.err = context.Canceled
			close(next.done)
		}
	}()
	for ctx.Err() == nil {
		w.mu.Lock()
		waiting := w.next
		w.next = nil
		w.mu.Unlock()
		err := w.poll(ctx)
		if err != nil && ctx.Err() == nil {
			w.note("reading EC2's ENIs: " + err.Error())
		}
		if waiting != nil {
			waiting.err = err
			close(waiting.done)
		}
		timer := time.NewTimer(w.interval)
		select {
		case <-ctx.Done():
		case <-w.kick:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// beforeDel is called when the harness deletes the pod holding a: it waits
// for a read of EC2 that begins after the call (which checks a with every
// other live address), then takes a out of the live set. The caller sends
// the pod's DEL after it returns. A read that failed is noted as a problem
// (the address went unchecked).
func (w *inUseWatch) beforeDel(ctx context.Context, a netip.Addr) {
	w.mu.Lock()
	r := w.next
	if r == nil {
		r = &pendingRead{done: make(chan struct{})}
		if w.stopped {
			r.err = errors.New("the watch has stopped")
			close(r.done)
		} else {
			w.next = r
			w.readSoon()
		}
	}
	w.mu.Unlock()
	select {
	case <-r.done:
		if r.err != nil && ctx.Err() == nil {
			w.note(fmt.Sprintf("address %s left unchecked before its DEL: %v", a, r.err))
		}
	case <-ctx.Done():
	}
	w.live.remove(a)
}

// readSoon asks for a read now rather than at the next interval.
func (w *inUseWatch) readSoon() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// read reads where EC2 has every address, and whether every ENI is
// attached.
func (w *inUseWatch) read(ctx context.Context) (map[netip.Addr]place, bool, error) {
	enis, err := w.admin.ENIs(ctx)
	if err != nil {
		return nil, false, err
	}
	places := map[netip.Addr]place{}
	calm := true
	for _, e := range enis {
		if e.Attachment == nil || e.Attachment.Status != world.AttachmentAttached {
			calm = false
			continue
		}
		for _, s := range e.SecondaryIPs {
			if a, err := netip.ParseAddr(s); err == nil {
				places[a] = place{node: e.Attachment.InstanceID, eni: e.ID, attachment: e.Attachment.ID}
			}
		}
	}
	return places, calm, nil
}

func (w *inUseWatch) poll(ctx context.Context) error {
	before := w.live.snapshot()
	began := time.Now()
	places, calm, err := w.read(ctx)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.polls++
	if !calm {
		w.calm, w.calmRead = time.Time{}, time.Time{}
	} else {
		if w.calm.IsZero() {
			w.calm = began
		}
		w.calmRead = began
	}
	for a, h := range before {
		if !w.live.still(a, h) {
			continue
		}
		w.checks++
		p, on := places[a]
		first, seen := w.seen[h]
		switch {
		case w.freed[h]:
			continue
		case on && p.node == h.node && !seen:
			w.seen[h] = p
			continue
		case on && p == first:
			continue
		}
		w.freed[h] = true
		if len(w.problems) < 20 {
			w.problems = append(w.problems, fmt.Sprintf("address %s freed while a pod on %s held it", a, h.node))
		}
	}
	return nil
}

func (w *inUseWatch) note(p string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.problems) < 20 {
		w.problems = append(w.problems, p)
	}
}

// calmSince reports since when every ENI has been attached (nothing
// detaching, nothing detached left to delete), counting from no earlier
// than from: reads that began at or after from, and at least d after that
// time, all found every ENI attached. A read before from does not count,
// so a quiet EC2 read before the way down gave anything up proves nothing
// about what it gave up.
func (w *inUseWatch) calmSince(from time.Time, d time.Duration) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.calm.IsZero() {
		return time.Time{}, false
	}
	since := w.calm
	if since.Before(from) {
		since = from
	}
	return since, !w.calmRead.Before(since.Add(d))
}

// tracked is a node's CNI backend that keeps the live set up to date and
// gives every sandbox of its round container IDs of its own (the kubelet
// model makes the same IDs in every burst).
type tracked struct {
	inner cni
	node  string
	round string
	live  *liveSet
}

func (t tracked) rename(req cniserver.Request) cniserver.Request {
	req.Attachment.ContainerID = roundID(t.round, req.Attachment.ContainerID)
	return req
}

func (t tracked) Add(ctx context.Context, req cniserver.Request) (cniserver.AddResult, error) {
	res, err := t.inner.Add(ctx, t.rename(req))
	if err == nil {
		t.live.add(res.Address.Addr(), t.node)
	}
	return res, err
}

func (t tracked) Del(ctx context.Context, req cniserver.Request) error {
	return t.inner.Del(ctx, t.rename(req))
}

// roundID is a container ID of its own for a round's sandbox.
func roundID(round, id string) string {
	h := sha256.Sum256([]byte(round + "/" + id))
	return hex.EncodeToString(h[:])
}
