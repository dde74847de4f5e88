package pool

import (
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/checkpoint"
)

// fakeClock moves only when told to; After channels fire on Advance.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{c.now.Add(d), ch})
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

// memStore is a Persister that keeps the last state and can be made to fail
// or held.
type memStore struct {
	mu    sync.Mutex
	last  checkpoint.State
	saves int
	fail  bool
	gate  *saveGate
}

// saveGate holds every Save while it is set: the Save hands the test the
// state it was given on saving, waits, and fails with what the test sends
// on finish (nil: it saves as usual). The test sees every Save, in order.
type saveGate struct {
	saving chan checkpoint.State
	finish chan error
}

// hold makes every Save wait on the returned gate until release.
func (m *memStore) hold() *saveGate {
	g := &saveGate{saving: make(chan checkpoint.State), finish: make(chan error)}
	m.mu.Lock()
	m.gate = g
	m.mu.Unlock()
	return g
}

func (m *memStore) release() {
	m.mu.Lock()
	m.gate = nil
	m.mu.Unlock()
}

var errDiskFull = errors.New("disk full")

func (m *memStore) Save(s checkpoint.State) error {
	// A Persister must not keep what it is given (the pool reuses it).
	s.ENIs, s.Addresses, s.Allocations = slices.Clone(s.ENIs), slices.Clone(s.Addresses), slices.Clone(s.Allocations)
	m.mu.Lock()
	g := m.gate
	m.mu.Unlock()
	if g != nil {
		g.saving <- s
		if err := <-g.finish; err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return errDiskFull
	}
	if err := s.Validate(); err != nil {
		return err
	}
	m.last, m.saves = s, m.saves+1
	return nil
}

func (m *memStore) setFail(v bool) {
	m.mu.Lock()
	m.fail = v
	m.mu.Unlock()
}

func (m *memStore) state() (checkpoint.State, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last, m.saves
}

const instance = "i-test"

var (
	eni0 = ENI{ID: "eni-0", MAC: "02:00:00:00:00:00", DeviceIndex: 0, Primary: true, SubnetID: "subnet-a",
		SubnetCIDR: netip.MustParsePrefix("10.0.0.0/16"), PrimaryIP: netip.MustParseAddr("10.0.0.10")}
	eni1 = ENI{ID: "eni-1", MAC: "02:00:00:00:00:01", DeviceIndex: 1, SubnetID: "subnet-a",
		SubnetCIDR: netip.MustParsePrefix("10.0.0.0/16"), PrimaryIP: netip.MustParseAddr("10.0.1.10")}
)

type fixture struct {
	p     *Pool
	clock *fakeClock
	store *memStore
}

// newPool returns a pool with eni0 and eni1 registered and no addresses.
func newPool(t *testing.T, cfg Config) fixture {
	t.Helper()
	f := fixture{clock: newFakeClock(), store: &memStore{}}
	cfg.InstanceID = instance
	if cfg.Clock == nil {
		cfg.Clock = f.clock
	}
	if cfg.Store == nil {
		cfg.Store = f.store
	}
	p, err := New(cfg, checkpoint.State{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []ENI{eni0, eni1} {
		if err := p.AddENI(e); err != nil {
			t.Fatal(err)
		}
	}
	f.p = p
	return f
}

func (f fixture) capacity(t *testing.T, eni string, addrs ...string) {
	t.Helper()
	if _, err := f.p.AddCapacity(eni, ips(addrs...), nil); err != nil {
		t.Fatal(err)
	}
}

func key(c string) Key { return Key{Network: "allot", ContainerID: c, IfName: "eth0"} }

// checkPersisted asserts the last saved state is exactly the pool's.
func (f fixture) checkPersisted(t *testing.T) {
	t.Helper()
	last, _ := f.store.state()
	snap := f.p.Snapshot()
	if err := snap.Validate(); err != nil {
		t.Fatalf("pool state invalid: %v", err)
	}
	// Expired cooldowns are computed, not persisted; compare states that
	// matter after normalising them.
	now := f.clock.Now()
	if got, want := normal(last, now), normal(snap, now); !equalStates(got, want) {
		t.Fatalf("persisted state differs from pool:\n saved %+v\n  pool %+v", got, want)
	}
}

// normal applies expired cooldowns, which the pool computes from the clock
// without writing them.
func normal(s checkpoint.State, now time.Time) checkpoint.State {
	s.Addresses = append([]checkpoint.Address(nil), s.Addresses...)
	for i, a := range s.Addresses {
		if a.State == checkpoint.Cooling && !now.Before(a.CoolUntil) {
			s.Addresses[i].State, s.Addresses[i].CoolUntil = checkpoint.Free, time.Time{}
		}
	}
	return s
}
