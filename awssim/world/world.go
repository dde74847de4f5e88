// Package world is the simulated AWS account behind awssim: VPCs, subnets
// with finite addresses, instance types, instances, ENIs, their attachments,
// addresses and prefixes, tags and ClientTokens. It enforces EC2's rules and
// limits and returns EC2's error codes, but knows nothing of HTTP.
//
// One mutex guards everything; every operation is O(small) under it and
// nothing sleeps while holding it. Time is simulated (see simclock): detach
// completions are events that fall due as the clock passes them, checked at
// every operation and by Tick.
package world

import (
	"container/heap"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/allotnet/allot/awssim/simclock"
)

// Config sets up a World. Durations are in simulated time.
type Config struct {
	Clock simclock.Clock
	// AccountID is the owner of every resource; default 123456789012.
	AccountID string
	Region    string
	// IMDSLag is how long after EC2 applies a change IMDS starts showing it.
	IMDSLag time.Duration
	// DetachDelay is how long an ENI stays "detaching".
	DetachDelay time.Duration
	// ConsistencyWindow hides a new ENI from DescribeNetworkInterfaces for this long.
	ConsistencyWindow time.Duration
	// Seed makes IDs, MACs and random address choice reproducible.
	Seed   int64
	Logger *slog.Logger
}

// World is the simulated account. Its methods are safe for concurrent use.
type World struct {
	clock simclock.Clock
	log   *slog.Logger

	mu                sync.Mutex
	accountID, region string
	imdsLag           time.Duration
	detachDelay       time.Duration
	consistency       time.Duration
	rng               *rand.Rand
	seq               uint64
	ids               map[string]bool // every ID and MAC handed out, never reused
	types             map[string]InstanceType
	vpcs              map[string]*vpc
	groups            map[string]string // security group ID -> its VPC
	subnets           map[string]*subnet
	instances         map[string]*instance
	enis              map[string]*eni
	attachments       map[string]*eni // attachment ID -> ENI
	tokens            map[string]tokenEntry
	events            eventQueue
	imds              map[string]*imdsHistory
	dirty             map[string]bool // instances whose IMDS view changed in this operation
	outbox            []hookEvent

	hookMu sync.Mutex // held while hooks run, so they see events in order
	hooks  map[int]Hooks
	hookID int
}

// New returns an empty world.
func New(cfg Config) *World {
	if cfg.Clock == nil {
		cfg.Clock = simclock.NewScaled(1)
	}
	if cfg.AccountID == "" {
		cfg.AccountID = "123456789012"
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &World{
		clock:       cfg.Clock,
		log:         cfg.Logger.With("component", "awssim-world"),
		accountID:   cfg.AccountID,
		region:      cfg.Region,
		imdsLag:     max(cfg.IMDSLag, 0),
		detachDelay: max(cfg.DetachDelay, 0),
		consistency: max(cfg.ConsistencyWindow, 0),
		rng:         rand.New(rand.NewPCG(uint64(cfg.Seed), 0x616c6c6f74)),
		ids:         map[string]bool{},
		types:       DefaultInstanceTypes(),
		vpcs:        map[string]*vpc{},
		groups:      map[string]string{},
		subnets:     map[string]*subnet{},
		instances:   map[string]*instance{},
		enis:        map[string]*eni{},
		attachments: map[string]*eni{},
		tokens:      map[string]tokenEntry{},
		imds:        map[string]*imdsHistory{},
		dirty:       map[string]bool{},
		hooks:       map[int]Hooks{},
	}
}

// Clock returns the world's clock.
func (w *World) Clock() simclock.Clock { return w.clock }

// AccountID returns the simulated account's ID.
func (w *World) AccountID() string { return w.accountID }

// Region returns the simulated region.
func (w *World) Region() string { return w.region }

// SetConsistencyWindow changes how long new ENIs stay invisible to Describe.
func (w *World) SetConsistencyWindow(d time.Duration) {
	w.mu.Lock()
	w.consistency = max(d, 0)
	w.mu.Unlock()
}

// ConsistencyWindow returns the current invisibility window.
func (w *World) ConsistencyWindow() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.consistency
}

// Tick applies every change that has fallen due (detach completions) and
// runs their hooks. awssim calls it periodically so hooks fire on time even
// when no request arrives.
func (w *World) Tick() { _ = w.do(func(time.Time) error { return nil }) }

// do runs fn under the lock after applying due events, then records IMDS
// snapshots for the instances fn changed and runs hooks in order, outside
// the world lock.
func (w *World) do(fn func(now time.Time) error) error {
	w.mu.Lock()
	now := w.clock.Now()
	w.advanceLocked(now)
	err := fn(now)
	for id := range w.dirty {
		w.recordIMDSLocked(id, now)
		delete(w.dirty, id)
	}
	events := w.outbox
	w.outbox = nil
	if len(events) == 0 {
		w.mu.Unlock()
		return err
	}
	w.hookMu.Lock()
	hooks := make([]Hooks, 0, len(w.hooks))
	for i := 0; i <= w.hookID; i++ {
		if h, ok := w.hooks[i]; ok {
			hooks = append(hooks, h)
		}
	}
	w.mu.Unlock()
	defer w.hookMu.Unlock()
	for _, ev := range events {
		for _, h := range hooks {
			ev.deliver(h)
		}
	}
	return err
}

// advanceLocked applies every event due at or before now.
func (w *World) advanceLocked(now time.Time) {
	for len(w.events) > 0 && !w.events[0].at.After(now) {
		ev := heap.Pop(&w.events).(*event)
		ev.apply(w, ev.at)
	}
}

// nextSeqLocked returns a creation sequence number; listings are ordered by it.
func (w *World) nextSeqLocked() uint64 {
	w.seq++
	return w.seq
}
