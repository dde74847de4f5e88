// Package pool is the agent's warm pool and datastore: the addresses of the
// node's ENIs (secondary IPs, or /28 prefixes expanded), which CNI attachment
// holds which, cooldown before reuse, and the release handshake with the
// broker. Every change is persisted through a Persister (the checkpoint)
// before its caller is answered, so what the agent answers is never ahead of
// what a restart would restore; concurrent changes share writes (group
// commit, commit.go). Policy — how many addresses to ask for, which to
// give back — is in pure functions (Shortfall, Excess).
package pool

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/allotnet/allot/agent/checkpoint"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// DefaultCooldown is how long a freed address waits before reuse.
const DefaultCooldown = 30 * time.Second

// DefaultRetryLinger covers kubelet's sandbox retry (10 to 15 s after the
// failure) with room to spare.
const DefaultRetryLinger = 30 * time.Second

// Persister stores the pool's state durably. *checkpoint.File is one.
// Save must not keep the state or its lists once it returns: the pool
// reuses them for its next write.
type Persister interface {
	Save(checkpoint.State) error
}

var _ Persister = (*checkpoint.File)(nil)

// Config configures a Pool.
type Config struct {
	// InstanceID is the node's instance; a checkpoint of another instance is
	// refused.
	InstanceID string
	// Cooldown before a freed address is reused; 0 means DefaultCooldown,
	// negative means none.
	Cooldown time.Duration
	// MaxWait bounds how long an ADD waits for an address when its context
	// allows longer; 0 means it waits only as long as the context.
	MaxWait time.Duration
	// RetryLinger is how long an ADD that gave up waiting for an address
	// still counts as Pending: the runtime tears the sandbox down and
	// kubelet retries the pod with a new one 10 to 15 s later, so the pod
	// still wants an address meanwhile. An ADD arriving takes the place of
	// the oldest one that gave up (it is most likely its retry). 0 means
	// DefaultRetryLinger; negative means an ADD that gave up is forgotten
	// at once.
	RetryLinger time.Duration
	// Store persists every change; nil keeps state in memory only (tests).
	Store Persister
	// CommitEachAlone writes every change on its own, holding the pool's
	// lock across the write, as the pool did before group commit. Only
	// benchmarks set it, to show what group commit saves.
	CommitEachAlone bool
	Clock           Clock
	Logger          *slog.Logger
}

// Pool is the warm pool and datastore. It is safe for concurrent use.
type Pool struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	enis   map[string]*ENI
	addrs  map[netip.Addr]*addrRec
	allocs map[Key]*Allocation
	// usageSeq is the last usage-report sequence number handed out;
	// usageSeqMark, the highest one the checkpoint allows (NextUsageSeq).
	usageSeq     uint64
	usageSeqMark uint64
	pending      int
	// gaveUp lists when ADDs gave up waiting for an address, oldest first,
	// for RetryLinger. Its own lock: an arriving ADD takes an entry off
	// before it queues for mu.
	gaveMu sync.Mutex
	gaveUp []time.Time
	// arriving counts ADDs inside Add that hold no address yet: waiting on
	// an empty pool, and also queued for mu or behind an exclusive change's
	// checkpoint write. The demand counts them all, so a burst of pods on
	// one node is stated as one demand at once rather than as the writes
	// let the ADDs through.
	arriving atomic.Int64
	// wake is closed (and replaced) when an address may have become
	// available, to wake waiting ADDs.
	wake chan struct{}
	// changed gets a token on every change, for the agent's reporters.
	changed chan struct{}

	// Group commit (commit.go): the batch gathering changes, the one being
	// written, what changes in flight claim, and exclusive changes waiting
	// or running. settled is closed (and replaced) when a write completes
	// or an exclusive change ends.
	open, writing *batch
	claimedKeys   map[Key]bool
	claimedAddrs  map[netip.Addr]bool
	// heldBack are freed addresses whose old pod's host pieces are still
	// being removed (holdback.go).
	heldBack map[netip.Addr]bool
	// written is what the pool's writes snapshot into, reused: one write
	// runs at a time, and a Persister keeps nothing of it.
	written          checkpoint.State
	usageSeqClaimed  bool
	exclusive        int
	exclusiveRunning bool
	settled          chan struct{}
}

type addrRec struct {
	addr      netip.Addr
	eni       string
	prefix    netip.Prefix
	state     checkpoint.AddressState
	coolUntil time.Time
	releaseID string
	holder    Key // when assigned
}

// New returns a pool holding st, which is usually what the checkpoint
// loaded (an empty State on first start). A state that contradicts itself or
// belongs to another instance is an error: nothing is dropped to make it fit.
func New(cfg Config, st checkpoint.State) (*Pool, error) {
	if cfg.RetryLinger == 0 {
		cfg.RetryLinger = DefaultRetryLinger
	}
	if cfg.Cooldown == 0 {
		cfg.Cooldown = DefaultCooldown
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pool{
		cfg:     cfg,
		log:     log.With("component", "pool"),
		enis:    map[string]*ENI{},
		addrs:   map[netip.Addr]*addrRec{},
		allocs:  map[Key]*Allocation{},
		wake:    make(chan struct{}),
		changed: make(chan struct{}, 1),

		claimedKeys:  map[Key]bool{},
		claimedAddrs: map[netip.Addr]bool{},
		heldBack:     map[netip.Addr]bool{},
		settled:      make(chan struct{}),
	}
	if err := p.restore(st); err != nil {
		return nil, fmt.Errorf("restore pool: %w", err)
	}
	return p, nil
}

func (p *Pool) restore(st checkpoint.State) error {
	if err := st.Validate(); err != nil {
		return err
	}
	if st.InstanceID != "" && p.cfg.InstanceID != "" && st.InstanceID != p.cfg.InstanceID {
		return fmt.Errorf("%w: it is %s's, this is %s", ErrWrongInstance, st.InstanceID, p.cfg.InstanceID)
	}
	p.usageSeq, p.usageSeqMark = st.UsageSeq, st.UsageSeq
	for _, e := range st.ENIs {
		p.enis[e.ID] = &ENI{ID: e.ID, MAC: e.MAC, DeviceIndex: e.DeviceIndex, Primary: e.Primary,
			SubnetID: e.SubnetID, SubnetCIDR: e.SubnetCIDR, PrimaryIP: e.PrimaryIP}
	}
	for _, a := range st.Addresses {
		p.addrs[a.Addr] = &addrRec{addr: a.Addr, eni: a.ENIID, prefix: a.Prefix, state: a.State,
			coolUntil: a.CoolUntil, releaseID: a.ReleaseID}
	}
	for _, al := range st.Allocations {
		k := Key{al.Network, al.ContainerID, al.IfName}
		p.allocs[k] = &Allocation{Key: k, Addr: al.Addr, ENIID: al.ENIID, Created: al.Created,
			PodInfo: PodInfo{HostVeth: al.HostVeth, Netns: al.Netns, PodNamespace: al.PodNamespace, PodName: al.PodName}}
		p.addrs[al.Addr].holder = k
	}
	return nil
}

// Snapshot returns the pool's state in checkpoint form, in a stable order,
// changes still being written included (commit.go).
func (p *Pool) Snapshot() checkpoint.State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshotLocked()
}

func (p *Pool) snapshotLocked() checkpoint.State {
	var st checkpoint.State
	p.snapshotInto(&st)
	return st
}

// snapshotInto fills st with the pool's state, in a stable order, reusing
// st's lists.
func (p *Pool) snapshotInto(st *checkpoint.State) {
	st.InstanceID, st.UsageSeq = p.cfg.InstanceID, p.usageSeqMark
	st.ENIs = slices.Grow(st.ENIs[:0], len(p.enis))
	for _, e := range p.enis {
		st.ENIs = append(st.ENIs, checkpoint.ENI{ID: e.ID, MAC: e.MAC, DeviceIndex: e.DeviceIndex, Primary: e.Primary,
			SubnetID: e.SubnetID, SubnetCIDR: e.SubnetCIDR, PrimaryIP: e.PrimaryIP})
	}
	st.Addresses = slices.Grow(st.Addresses[:0], len(p.addrs))
	for _, a := range p.addrs {
		st.Addresses = append(st.Addresses, checkpoint.Address{Addr: a.addr, ENIID: a.eni, Prefix: a.prefix,
			State: a.state, CoolUntil: a.coolUntil, ReleaseID: a.releaseID})
	}
	st.Allocations = slices.Grow(st.Allocations[:0], len(p.allocs))
	for _, al := range p.allocs {
		st.Allocations = append(st.Allocations, checkpoint.Allocation{Network: al.Network, ContainerID: al.ContainerID,
			IfName: al.IfName, Addr: al.Addr, ENIID: al.ENIID, HostVeth: al.HostVeth, Netns: al.Netns,
			PodNamespace: al.PodNamespace, PodName: al.PodName, Created: al.Created})
	}
	sortState(st)
	// Empty lists are nil, as a fresh snapshot's are.
	st.ENIs, st.Addresses, st.Allocations = nilIfEmpty(st.ENIs), nilIfEmpty(st.Addresses), nilIfEmpty(st.Allocations)
}

func nilIfEmpty[T any](l []T) []T {
	if len(l) == 0 {
		return nil
	}
	return l
}

// wakeLocked wakes every waiting ADD to look again.
func (p *Pool) wakeLocked() {
	close(p.wake)
	p.wake = make(chan struct{})
}

// Changed delivers a token after changes, coalesced: a reporter waiting on it
// reads the pool's state when it fires.
func (p *Pool) Changed() <-chan struct{} { return p.changed }

// expireLocked turns cooling addresses whose cooldown has passed into free
// ones. It is a function of the clock alone, so it needs no commit: a
// restart would compute the same.
func (p *Pool) expireLocked(now time.Time) {
	for _, a := range p.addrs {
		if a.state == checkpoint.Cooling && !now.Before(a.coolUntil) {
			a.state, a.coolUntil = checkpoint.Free, time.Time{}
		}
	}
}

// ENI returns the ENI with id.
func (p *Pool) ENI(id string) (ENI, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.enis[id]
	if !ok {
		return ENI{}, false
	}
	return *e, true
}

// ENIs returns the pool's ENIs by device index.
func (p *Pool) ENIs() []ENI {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []ENI
	for _, e := range sortedENIs(p.enis) {
		out = append(out, *e)
	}
	return out
}

// View returns the policy's view of the pool.
func (p *Pool) View() []ENIView {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(p.cfg.Clock.Now())
	return p.viewLocked()
}

func (p *Pool) viewLocked() []ENIView {
	byENI := map[string]*ENIView{}
	var out []*ENIView
	for _, e := range sortedENIs(p.enis) {
		v := &ENIView{ID: e.ID, DeviceIndex: e.DeviceIndex, Primary: e.Primary}
		byENI[e.ID] = v
		out = append(out, v)
	}
	for _, a := range sortedAddrs(p.addrs) {
		v := byENI[a.eni]
		v.Addrs = append(v.Addrs, AddrView{Addr: a.addr, Prefix: a.prefix, State: p.viewStateLocked(a)})
	}
	views := make([]ENIView, len(out))
	for i, v := range out {
		views[i] = *v
	}
	return views
}

// Stats counts the pool.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(p.cfg.Clock.Now())
	return p.statsLocked()
}

// Demand is the pool's current demand under targets t and limits l.
func (p *Pool) Demand(t Targets, l Limits) Demand {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(p.cfg.Clock.Now())
	return p.demandLocked(t, l)
}

// demandLocked counts every ADD that holds no address yet (arriving). The
// ones the free addresses will serve are counted as already holding theirs;
// the rest are Pending, and the warm targets are measured on what the
// arrivals leave free.
func (p *Pool) demandLocked(t Targets, l Limits) Demand {
	s := p.statsLocked()
	free := 0
	for _, a := range p.addrs {
		if a.state == checkpoint.Free && !p.heldBack[a.addr] {
			free++
		}
	}
	unserved := max(int(p.arriving.Load()), p.pending) + p.lingering(p.cfg.Clock.Now())
	taken := min(unserved, free)
	s.Assigned += taken
	s.FreePrefixes = min(s.FreePrefixes, max(s.Available(), 0)/allotv1.PrefixSize)
	pending := unserved - taken
	// The waiting pods take the node's room first; a warm target it has no
	// room left for is no demand (asked for, the broker would find the
	// node full while its last ENI is still on its way to this pool).
	room := max(Capacity(t, l)-s.Total-s.Releasing, 0)
	need := pending
	if t.PrefixMode {
		need = ceilDiv(pending, allotv1.PrefixSize) * allotv1.PrefixSize
	}
	return Demand{Pending: pending, WarmShortfall: min(Shortfall(t, l, s), max(room-need, 0))}
}

// Usage lists the addresses held by pods and those free in the pool (cooling
// included; releasing ones are in neither), for the usage report.
func (p *Pool) Usage() (assigned, free []netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range sortedAddrs(p.addrs) {
		switch a.state {
		case checkpoint.Assigned:
			assigned = append(assigned, a.addr)
		case checkpoint.Free, checkpoint.Cooling:
			free = append(free, a.addr)
		}
	}
	return assigned, free
}

// UsageSeqBlock is how many usage-report sequence numbers one checkpoint
// write reserves.
const UsageSeqBlock = 1024

// NextUsageSeq returns the next usage-report sequence number. A restarted
// agent must never reuse one (the broker ignores a report whose number is
// not above the last it stored), so the checkpoint records a mark no
// number handed out is above, and a restart continues from the mark. The
// mark moves UsageSeqBlock at a time: one checkpoint write per block of
// reports, not one per report, which would put a write after nearly every
// ADD and DEL. A restart skips at most a block's unused numbers, well
// within the jump the broker accepts.
func (p *Pool) NextUsageSeq() (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := claim{usageSeq: true}
	p.waitTurnLocked(c)
	if p.usageSeq < p.usageSeqMark {
		p.usageSeq++
		return p.usageSeq, nil
	}
	mark := p.usageSeqMark
	p.usageSeqMark = p.usageSeq + UsageSeqBlock
	if err := p.commitLocked(func() { p.usageSeqMark = mark }, c); err != nil {
		return 0, err
	}
	p.usageSeq++
	return p.usageSeq, nil
}

// giveUp records an ADD that gave up waiting; its pod will be retried.
func (p *Pool) giveUp() {
	if p.cfg.RetryLinger <= 0 {
		return
	}
	p.gaveMu.Lock()
	defer p.gaveMu.Unlock()
	p.gaveUp = append(p.gaveUp, p.cfg.Clock.Now())
}

// retried takes the oldest ADD that gave up off the list: an arriving ADD
// is most likely its retry, and counts as arriving from now on.
func (p *Pool) retried() {
	p.gaveMu.Lock()
	defer p.gaveMu.Unlock()
	if len(p.gaveUp) > 0 {
		p.gaveUp = p.gaveUp[1:]
	}
}

// lingering counts the ADDs that gave up less than RetryLinger ago,
// forgetting older ones: their pods were not retried here (deleted, or
// scheduled elsewhere).
func (p *Pool) lingering(now time.Time) int {
	p.gaveMu.Lock()
	defer p.gaveMu.Unlock()
	i := 0
	for i < len(p.gaveUp) && now.Sub(p.gaveUp[i]) >= p.cfg.RetryLinger {
		i++
	}
	p.gaveUp = p.gaveUp[i:]
	return len(p.gaveUp)
}
