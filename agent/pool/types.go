package pool

import (
	"cmp"
	"errors"
	"net/netip"
	"time"
)

// Key identifies a CNI attachment, as the CNI spec defines one. Allocations
// are keyed by it, never by pod name: a pod that comes back under the same
// name gets a new container ID, so the old sandbox's DEL can't touch it.
type Key struct {
	Network     string
	ContainerID string
	IfName      string
}

func (k Key) String() string { return k.Network + "/" + k.ContainerID + "/" + k.IfName }

func (k Key) compare(o Key) int {
	return cmp.Or(cmp.Compare(k.Network, o.Network), cmp.Compare(k.ContainerID, o.ContainerID), cmp.Compare(k.IfName, o.IfName))
}

// PodInfo is what the agent records about an attachment besides its key.
type PodInfo struct {
	HostVeth     string
	Netns        string
	PodNamespace string
	PodName      string
}

// Allocation is an address held by one attachment.
type Allocation struct {
	Key
	PodInfo
	Addr    netip.Addr
	ENIID   string
	Created time.Time
}

// ENI is an interface whose addresses the pool hands out.
type ENI struct {
	ID          string
	MAC         string
	DeviceIndex int
	Primary     bool
	SubnetID    string
	SubnetCIDR  netip.Prefix
	// PrimaryIP is the ENI's own address; the pool never hands it out.
	PrimaryIP netip.Addr
}

// Demand is what the agent tells the broker it wants.
type Demand struct {
	// Pending is ADDs waiting for an address right now.
	Pending int
	// WarmShortfall is addresses the warm targets miss (see Shortfall).
	WarmShortfall int
}

// Errors the pool returns; match them with errors.Is.
var (
	// ErrNoAddress means no address became free before the ADD's deadline.
	// The CNI layer answers it with code 11, "try again later".
	ErrNoAddress = errors.New("no free address in the pool")
	// ErrInvalidKey means an attachment key without a container ID or
	// interface name.
	ErrInvalidKey = errors.New("invalid attachment key")
	// ErrUnknownENI means an operation named an ENI the pool doesn't have.
	ErrUnknownENI = errors.New("unknown eni")
	// ErrInUse means an ENI still has addresses held by pods.
	ErrInUse = errors.New("eni has assigned addresses")
	// ErrConflict means an address is already in the pool on another ENI.
	ErrConflict = errors.New("address already in the pool on another eni")
	// ErrWrongInstance means a checkpoint belongs to another instance.
	ErrWrongInstance = errors.New("checkpoint belongs to another instance")
)

// Clock is the pool's time source: cooldowns are measured with it, and an
// ADD waiting only for a cooldown to end sleeps on it.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// RealClock is the wall clock.
var RealClock Clock = realClock{}
