package burst

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"sync"
	"time"

	"github.com/allotnet/allot/agent/cniserver"
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

// inUseWatch checks, over and over, that every address a live pod holds
// is on an ENI EC2 has attached to the pod's node: an address a pod held
// both before EC2's state was read and after is one EC2 had all along, so
// missing from it means it was freed while in use. An address freed and
// its pod deleted between two reads goes unseen: the reads are every
// interval apart.
type inUseWatch struct {
	admin    *admin
	live     *liveSet
	interval time.Duration

	mu       sync.Mutex
	polls    int
	checks   int64
	freed    map[holding]bool
	problems []string
	// settled is when the last read found every ENI attached (none
	// detaching or waiting to be deleted), zero when it did not.
	settled time.Time
}

func (w *inUseWatch) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := w.poll(ctx); err != nil && ctx.Err() == nil {
			w.note("reading EC2's ENIs: " + err.Error())
		}
		select {
		case <-ctx.Done():
		case <-time.After(w.interval):
		}
	}
}

func (w *inUseWatch) poll(ctx context.Context) error {
	before := w.live.snapshot()
	enis, err := w.admin.ENIs(ctx)
	if err != nil {
		return err
	}
	onNode := map[netip.Addr]string{}
	settled := true
	for _, e := range enis {
		if e.Attachment == nil {
			settled = false
			continue
		}
		for _, s := range e.SecondaryIPs {
			if a, err := netip.ParseAddr(s); err == nil {
				onNode[a] = e.Attachment.InstanceID
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.polls++
	if settled {
		if w.settled.IsZero() {
			w.settled = time.Now()
		}
	} else {
		w.settled = time.Time{}
	}
	for a, h := range before {
		if !w.live.still(a, h) {
			continue
		}
		w.checks++
		if onNode[a] == h.node || w.freed[h] {
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

// settledFor reports whether every ENI has been attached (nothing
// detaching, nothing detached left to delete) for at least d.
func (w *inUseWatch) settledFor(d time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.settled.IsZero() && time.Since(w.settled) >= d
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
