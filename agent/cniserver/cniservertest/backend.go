// Package cniservertest provides a stateful fake cniserver.Backend and a
// helper that serves it on a temporary unix socket, for tests that drive
// the real plugin binary the way a container runtime does.
package cniservertest

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/allotnet/allot/agent/cniserver"
)

// Record is the fake's state for one attachment.
type Record struct {
	Address      netip.Prefix
	NetNS        string
	PodNamespace string
	PodName      string
	AddedAt      time.Time
}

// Backend is a stateful fake agent: a pool of addresses and a map of
// attachments to addresses. It follows the cniserver.Backend contract
// (idempotent ADD and DEL, queued DELs don't remove newer records) and fails
// on request through Fail.
type Backend struct {
	mu    sync.Mutex
	free  []netip.Addr
	atts  map[cniserver.Attachment]Record
	fail  map[string]error
	calls map[string]int
	reqs  map[string][]cniserver.Request
	gcs   []cniserver.GCRequest
	stall map[string]chan struct{}
	now   func() time.Time
}

var _ cniserver.Backend = (*Backend)(nil)

// NewBackend returns a fake whose pool holds addrs.
func NewBackend(addrs ...netip.Addr) *Backend {
	return &Backend{
		free:  slices.Clone(addrs),
		atts:  map[cniserver.Attachment]Record{},
		fail:  map[string]error{},
		calls: map[string]int{},
		reqs:  map[string][]cniserver.Request{},
		stall: map[string]chan struct{}{},
		now:   time.Now,
	}
}

// Fail makes every later call of verb ("add", "del", "check", "gc",
// "status") return err; nil clears it.
func (b *Backend) Fail(verb string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		delete(b.fail, verb)
		return
	}
	b.fail[verb] = err
}

// Stall makes every later call of verb ("add", "del") hang, as on an agent
// wedged behind a lock, until the caller gives up or release is called.
func (b *Backend) Stall(verb string) (release func()) {
	ch := make(chan struct{})
	b.mu.Lock()
	b.stall[verb] = ch
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			if b.stall[verb] == ch {
				delete(b.stall, verb)
			}
			b.mu.Unlock()
			close(ch)
		})
	}
}

// wait blocks while verb is stalled or until ctx ends.
func (b *Backend) wait(ctx context.Context, verb string) error {
	b.mu.Lock()
	ch := b.stall[verb]
	b.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s stalled: %w", verb, ctx.Err())
	}
}

// Seed records an attachment the runtime doesn't know about (drift), taking
// addr out of the pool if it is there.
func (b *Backend) Seed(a cniserver.Attachment, addr netip.Addr) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free = slices.DeleteFunc(b.free, func(x netip.Addr) bool { return x == addr })
	b.atts[a] = Record{Address: netip.PrefixFrom(addr, 32), AddedAt: b.now()}
}

// Forget drops an attachment's record without returning its address, as an
// agent that lost state would.
func (b *Backend) Forget(a cniserver.Attachment) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.atts, a)
}

// Attachments returns a copy of the current records.
func (b *Backend) Attachments() map[cniserver.Attachment]Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[cniserver.Attachment]Record, len(b.atts))
	for k, v := range b.atts {
		out[k] = v
	}
	return out
}

// Calls returns how many times verb was called.
func (b *Backend) Calls(verb string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[verb]
}

// TotalCalls returns the number of calls of every verb.
func (b *Backend) TotalCalls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, c := range b.calls {
		n += c
	}
	return n
}

// Requests returns the requests of verb ("add", "del", "check") in order.
func (b *Backend) Requests(verb string) []cniserver.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.reqs[verb])
}

// GCRequests returns the GC requests received, in order.
func (b *Backend) GCRequests() []cniserver.GCRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.gcs)
}

// FreeCount returns how many addresses the pool still holds.
func (b *Backend) FreeCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.free)
}

// begin counts a call and returns the configured failure; b.mu is held.
func (b *Backend) begin(verb string, req *cniserver.Request) error {
	b.calls[verb]++
	if req != nil {
		b.reqs[verb] = append(b.reqs[verb], *req)
	}
	return b.fail[verb]
}

// Add implements cniserver.Backend.
func (b *Backend) Add(ctx context.Context, req cniserver.Request) (cniserver.AddResult, error) {
	if err := b.wait(ctx, "add"); err != nil {
		return cniserver.AddResult{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.begin("add", &req); err != nil {
		return cniserver.AddResult{}, err
	}
	rec, ok := b.atts[req.Attachment]
	if !ok {
		if len(b.free) == 0 {
			return cniserver.AddResult{}, fmt.Errorf("add %s: %w (fake pool of 0 addresses)", req.Attachment, cniserver.ErrPoolEmpty)
		}
		rec = Record{
			Address:      netip.PrefixFrom(b.free[0], 32),
			NetNS:        req.NetNS,
			PodNamespace: req.PodNamespace,
			PodName:      req.PodName,
			AddedAt:      b.now(),
		}
		b.free = b.free[1:]
		b.atts[req.Attachment] = rec
	}
	return cniserver.AddResult{
		Address:      rec.Address,
		Gateway:      netip.MustParseAddr("169.254.1.1"),
		HostIfName:   HostIfName(req.Attachment),
		HostMAC:      "02:00:00:00:00:01",
		ContainerMAC: "02:00:00:00:00:02",
		ENIID:        "eni-0123456789abcdef0",
	}, nil
}

// HostIfName is the fake's host veth name, derived from the key as the real
// agent's is.
func HostIfName(a cniserver.Attachment) string {
	id := a.ContainerID
	if len(id) > 8 {
		id = id[:8]
	}
	return "alt" + id
}

// Del implements cniserver.Backend.
func (b *Backend) Del(ctx context.Context, req cniserver.Request) error {
	if err := b.wait(ctx, "del"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.begin("del", &req); err != nil {
		return err
	}
	rec, ok := b.atts[req.Attachment]
	if !ok {
		return nil
	}
	if !req.QueuedAt.IsZero() && rec.AddedAt.After(req.QueuedAt) {
		return nil // the record belongs to an ADD after the queued DEL
	}
	delete(b.atts, req.Attachment)
	b.free = append(b.free, rec.Address.Addr())
	return nil
}

// Check implements cniserver.Backend: the record must exist and prevResult
// must carry its address.
func (b *Backend) Check(_ context.Context, req cniserver.Request) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.begin("check", &req); err != nil {
		return err
	}
	rec, ok := b.atts[req.Attachment]
	if !ok {
		return fmt.Errorf("check %s: %w", req.Attachment, cniserver.ErrUnknownAttachment)
	}
	r, err := current.NewResult(req.PrevResult)
	if err != nil {
		return fmt.Errorf("check %s: %w: prevResult: %v", req.Attachment, cniserver.ErrInvalidRequest, err)
	}
	prev := r.(*current.Result)
	for _, ip := range prev.IPs {
		if ip.Address.String() == rec.Address.String() {
			return nil
		}
	}
	return fmt.Errorf("check %s: %w: prevResult does not hold %s", req.Attachment, cniserver.ErrCheckFailed, rec.Address)
}

// GC implements cniserver.Backend.
func (b *Backend) GC(_ context.Context, req cniserver.GCRequest) ([]cniserver.Attachment, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls["gc"]++
	b.gcs = append(b.gcs, req)
	if err := b.fail["gc"]; err != nil {
		return nil, err
	}
	var removed []cniserver.Attachment
	for a, rec := range b.atts {
		if a.Network != req.Network || slices.Contains(req.Valid, a) {
			continue
		}
		delete(b.atts, a)
		b.free = append(b.free, rec.Address.Addr())
		removed = append(removed, a)
	}
	return removed, nil
}

// Status implements cniserver.Backend: an empty pool can't serve ADDs.
func (b *Backend) Status(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.begin("status", nil); err != nil {
		return err
	}
	if len(b.free) == 0 {
		return fmt.Errorf("status: %w", cniserver.ErrPoolEmpty)
	}
	return nil
}
