package executor

import (
	"context"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/instances"
	"github.com/allotnet/allot/broker/store"
)

// The engine's needs of the broker's etcd store, by role. Declared here,
// by their consumer, so the engine's dependence on etcd is visible in one
// place.

// Reads is what a planning round reads of the cluster's state.
type Reads interface {
	// ReadPlanning reads nodes, demands, usage, subnets and pod networks,
	// setting aside
	// (not failing on) records that do not decode.
	ReadPlanning(ctx context.Context) (store.Planning, error)
	GetENI(ctx context.Context, id string) (store.ENI, error)
	// SetNoPrefix records that a subnet has no free /28 until a time.
	SetNoPrefix(ctx context.Context, id string, until time.Time, reason string) (store.Subnet, error)
	ListENIs(ctx context.Context) ([]store.ENI, error)
	// Follow keeps the engine's view of the records current (a full
	// read, then an etcd watch's changes).
	Follow(ctx context.Context, opts ...store.FollowOption) *store.Follower
}

// Intents is the write-ahead record of EC2 calls: an intent (reserving
// subnet budget) before each mutating call, its outcome after.
type Intents interface {
	BeginIntent(ctx context.Context, in store.Intent) (store.Intent, error)
	GetIntent(ctx context.Context, id string) (store.Intent, error)
	ListIntents(ctx context.Context) ([]store.Intent, error)
	ListOpenIntents(ctx context.Context) ([]store.Intent, error)
	PruneIntents(ctx context.Context, olderThan time.Time) (int, error)
	// DeleteIntents deletes finished intents the engine's view names.
	DeleteIntents(ctx context.Context, old []store.Intent) (int, error)
	CompleteCreate(ctx context.Context, intentID string, eni store.ENI) error
	CompleteAttach(ctx context.Context, intentID, eniID string, deviceIndex int) error
	CompleteModify(ctx context.Context, intentID string) error
	CompleteAssign(ctx context.Context, intentID, eniID string, addrs, prefixes []string) error
	CompleteUnassign(ctx context.Context, intentID, eniID string, addrs, prefixes []string) error
	CompleteDetach(ctx context.Context, intentID, eniID string) error
	CompleteDelete(ctx context.Context, intentID, eniID string) error
	CompleteGiveUp(ctx context.Context, intentID, eniID string) error
	FailIntent(ctx context.Context, intentID string, cause error) error
	// Apply commits several of the writes above (as store ops) in one
	// transaction.
	Apply(ctx context.Context, ops ...*store.Op) error
}

// Releases is the broker's side of the release handshake: propose, and
// once the agent acknowledged, finish (or cancel).
type Releases interface {
	// ProposeReleases proposes several releases, a few to a
	// transaction; errs says which were refused and why.
	ProposeReleases(ctx context.Context, rels []store.Release) (out []store.Release, errs []error, err error)
	ListReleases(ctx context.Context, instanceID string) ([]store.Release, error)
	FinishRelease(ctx context.Context, id string) error
	CancelRelease(ctx context.Context, id string) error
	PruneReleases(ctx context.Context, olderThan time.Time) (int, error)
}

// NodeStatus is where the engine publishes why a node's demand is unmet
// (store.NodeStatus), for WatchNode to pass on to the node's agent.
type NodeStatus interface {
	PutNodeStatus(ctx context.Context, st store.NodeStatus) error
	ClearNodeStatus(ctx context.Context, id string) error
	ListNodeStatus(ctx context.Context) (map[string]store.NodeStatus, error)
}

// Store is every role the engine needs, the instance cache's writes
// (instances.Store) included.
type Store interface {
	Reads
	Intents
	Releases
	NodeStatus
	instances.Store
}

// EC2 is the part of the EC2 client the engine uses. Every method waits for
// a rate-limit token before it sends.
type EC2 interface {
	CreateENI(ctx context.Context, in ec2client.CreateENIInput) (ec2client.ENIInfo, error)
	AttachENI(ctx context.Context, eniID, instanceID string, deviceIndex int) (string, error)
	SetDeleteOnTermination(ctx context.Context, eniID, attachmentID string, on bool) error
	AssignAddresses(ctx context.Context, eniID string, count int, prefixes bool) ([]string, error)
	UnassignAddresses(ctx context.Context, eniID string, addrs, prefixes []string) error
	DetachENI(ctx context.Context, attachmentID string, force bool) error
	DeleteENI(ctx context.Context, eniID string) error
	DescribeENIs(ctx context.Context, in ec2client.DescribeENIsInput) ([]ec2client.ENIInfo, error)
	instances.EC2
}

var (
	_ Reads      = (*store.Store)(nil)
	_ Intents    = (*store.Store)(nil)
	_ Releases   = (*store.Store)(nil)
	_ NodeStatus = (*store.Store)(nil)
	_ Store      = (*store.Store)(nil)
	_ EC2        = (*ec2client.Client)(nil)
)
