// Package checkpoint keeps the agent's allocation state in one file of
// versioned, checksummed JSON records: the file is now and then rewritten
// whole, atomically (write temp, fsync, rename, fsync directory), as one
// record of the whole state, and in between every change appends a record
// of what it changed and syncs it once (journal.go). It is read back on
// start: the last whole state with the changes after it replayed; a torn
// last record (a crash mid-append) is dropped with a warning. A file that
// can't otherwise be trusted is an error, never an empty state: a restart
// must not free what is in use.
package checkpoint

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// The record formats this package writes and reads. Whole states keep
// the version they always had, so a file just rewritten whole is still
// read by an agent from before changes were recorded; a change has a
// version of its own, which such an agent refuses (ErrUnsupportedVersion)
// rather than misread.
const (
	// Version is a record holding the node's whole state.
	Version = 1
	// ChangeVersion is a record holding a change to the state before it.
	ChangeVersion = 2
)

// State is everything the agent must not forget across a restart.
type State struct {
	// InstanceID names the node the state belongs to, so a checkpoint
	// carried to another instance (a reused disk image) is noticed.
	InstanceID string `json:"instanceID,omitempty"`
	// UsageSeq is a mark no usage report's sequence number is above (the
	// pool reserves numbers in blocks); a new process continues above it
	// so the broker never drops its reports.
	UsageSeq    uint64       `json:"usageSeq"`
	ENIs        []ENI        `json:"enis"`
	Addresses   []Address    `json:"addresses"`
	Allocations []Allocation `json:"allocations"`
}

// ENI is an interface whose addresses are in the pool.
type ENI struct {
	ID          string       `json:"id"`
	MAC         string       `json:"mac"`
	DeviceIndex int          `json:"deviceIndex"`
	Primary     bool         `json:"primary,omitempty"`
	SubnetID    string       `json:"subnetID,omitempty"`
	SubnetCIDR  netip.Prefix `json:"subnetCIDR,omitzero"`
	// PrimaryIP is the ENI's own address, never given to a pod.
	PrimaryIP netip.Addr `json:"primaryIP,omitzero"`
}

// AddressState is where a pool address is in its life.
type AddressState string

// Address states.
const (
	// Free addresses can be handed to a pod.
	Free AddressState = "free"
	// Cooling addresses were freed recently and wait until CoolUntil before
	// reuse, so stale endpoints and conntrack entries don't reach a new pod.
	Cooling AddressState = "cooling"
	// Assigned addresses are held by exactly one allocation.
	Assigned AddressState = "assigned"
	// Releasing addresses were acknowledged to the broker for release
	// (ReleaseID) and must never be handed out again.
	Releasing AddressState = "releasing"
)

func (s AddressState) valid() bool {
	switch s {
	case Free, Cooling, Assigned, Releasing:
		return true
	}
	return false
}

// Address is one pod-usable address of the pool.
type Address struct {
	Addr  netip.Addr `json:"addr"`
	ENIID string     `json:"eniID"`
	// Prefix is the delegated /28 the address comes from; zero for a
	// secondary IP.
	Prefix    netip.Prefix `json:"prefix,omitzero"`
	State     AddressState `json:"state"`
	CoolUntil time.Time    `json:"coolUntil,omitzero"`
	ReleaseID string       `json:"releaseID,omitempty"`
}

// Allocation is one CNI attachment holding an address. The key is the
// attachment (Network, ContainerID, IfName), never the pod name.
type Allocation struct {
	Network      string     `json:"network"`
	ContainerID  string     `json:"containerID"`
	IfName       string     `json:"ifname"`
	Addr         netip.Addr `json:"addr"`
	ENIID        string     `json:"eniID"`
	HostVeth     string     `json:"hostVeth,omitempty"`
	Netns        string     `json:"netns,omitempty"`
	PodNamespace string     `json:"podNamespace,omitempty"`
	PodName      string     `json:"podName,omitempty"`
	Created      time.Time  `json:"created"`
}

// ErrInvalid reports a state that contradicts itself.
var ErrInvalid = errors.New("invalid checkpoint state")

// Validate checks that s is consistent: every address belongs to a known ENI
// and appears once, every allocation holds a distinct assigned address, and
// no address is assigned without an allocation.
func (s State) Validate() error { return s.validate(new(validator)) }

// validator holds Validate's indexes, so that a caller checking state on
// every write (File.Save) reuses them instead of making four maps each
// time.
type validator struct {
	enis  map[string]bool
	addrs map[netip.Addr]AddressState
	keys  map[attachKey]bool
	held  map[netip.Addr]bool
}

func (v *validator) reset() {
	if v.enis == nil {
		v.enis, v.addrs = map[string]bool{}, map[netip.Addr]AddressState{}
		v.keys, v.held = map[attachKey]bool{}, map[netip.Addr]bool{}
		return
	}
	clear(v.enis)
	clear(v.addrs)
	clear(v.keys)
	clear(v.held)
}

func (s State) validate(v *validator) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
	}
	v.reset()
	enis := v.enis
	for _, e := range s.ENIs {
		if e.ID == "" {
			return bad("eni with empty id")
		}
		if enis[e.ID] {
			return bad("eni %s listed twice", e.ID)
		}
		enis[e.ID] = true
	}
	addrs := v.addrs
	for _, a := range s.Addresses {
		if !a.Addr.IsValid() {
			return bad("address with no ip on eni %s", a.ENIID)
		}
		if _, dup := addrs[a.Addr]; dup {
			return bad("address %s listed twice", a.Addr)
		}
		if !enis[a.ENIID] {
			return bad("address %s on unknown eni %q", a.Addr, a.ENIID)
		}
		if !a.State.valid() {
			return bad("address %s has unknown state %q", a.Addr, a.State)
		}
		if a.Prefix.IsValid() && !a.Prefix.Contains(a.Addr) {
			return bad("address %s outside its prefix %s", a.Addr, a.Prefix)
		}
		addrs[a.Addr] = a.State
	}
	keys, held := v.keys, v.held
	for _, al := range s.Allocations {
		k := al.key()
		if al.ContainerID == "" || al.IfName == "" {
			return bad("allocation of %s has an incomplete key %+v", al.Addr, k)
		}
		if keys[k] {
			return bad("attachment %s/%s/%s allocated twice", al.Network, al.ContainerID, al.IfName)
		}
		keys[k] = true
		if held[al.Addr] {
			return bad("address %s held by two attachments", al.Addr)
		}
		held[al.Addr] = true
		state, ok := addrs[al.Addr]
		if !ok {
			return bad("allocation %s/%s/%s holds %s, which is not in the pool", al.Network, al.ContainerID, al.IfName, al.Addr)
		}
		if state != Assigned {
			return bad("allocation %s/%s/%s holds %s, which is %s", al.Network, al.ContainerID, al.IfName, al.Addr, state)
		}
	}
	for _, a := range s.Addresses {
		if a.State == Assigned && !held[a.Addr] {
			return bad("address %s is assigned but no attachment holds it", a.Addr)
		}
	}
	return nil
}
