package server

import (
	"context"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
)

// The services' needs of broker/store, by consumer. Every replica serves
// from etcd through them, so a standby answers exactly as the leader does.

// ViewReads is a full read of what a view holds (loadView), at a revision;
// the health check reads the revision alone.
type ViewReads interface {
	Revision(ctx context.Context) (int64, error)
	// ReadPlanning reads nodes, demands, usage and subnets, setting aside
	// the records that do not decode.
	ReadPlanning(ctx context.Context) (store.Planning, error)
	ListENIs(ctx context.Context) ([]store.ENI, error)
	ListSubnets(ctx context.Context) ([]store.Subnet, error)
	ListReleases(ctx context.Context, instanceID string) ([]store.Release, error)
	ListNodeStatus(ctx context.Context) (map[string]store.NodeStatus, error)
}

// HubStore is what the watch streams' in-memory copy reads: a full load,
// then etcd's changes (Follow).
type HubStore interface {
	ViewReads
	Follow(ctx context.Context, opts ...store.FollowOption) *store.Follower
}

// NodeStore is what NodeService writes and reads for agents.
type NodeStore interface {
	Revision(ctx context.Context) (int64, error)
	PutNode(ctx context.Context, n store.Node) (store.Node, error)
	GetNode(ctx context.Context, id string) (store.Node, error)
	// PutDemands writes several demands in one transaction, each with its own
	// outcome (store.Store.PutDemands).
	PutDemands(ctx context.Context, ds []store.Demand) ([]error, error)
	PutUsage(ctx context.Context, u store.Usage) (bool, error)
	KeepAlive(ctx context.Context, instanceID string, ttl time.Duration) error
	AckRelease(ctx context.Context, instanceID, releaseID string, addrs, prefixes []string) (store.Release, error)
	ListENIs(ctx context.Context) ([]store.ENI, error)
	// NodeENIsSince reads a node's ENIs from what the hub knew of them
	// at a revision: those ENIs' keys and the ENI records written since.
	NodeENIsSince(ctx context.Context, instanceID string, known []store.ENI, since int64) ([]store.ENI, int64, error)
	ListSubnets(ctx context.Context) ([]store.Subnet, error)
}

// BudgetStore is what BudgetService reads and writes.
type BudgetStore interface {
	ViewReads
	SetSubnetBudget(ctx context.Context, id string, headroom, cap int64) (store.Subnet, error)
}

// AdminStore is what AdminService reads for operators.
type AdminStore interface {
	ViewReads
	Alive(ctx context.Context) (map[string]bool, error)
	ListDemands(ctx context.Context) (map[string]store.Demand, error)
	ListENIs(ctx context.Context) ([]store.ENI, error)
	ListNodeENIs(ctx context.Context, instanceID string) ([]store.ENI, error)
	ListOpenIntents(ctx context.Context) ([]store.Intent, error)
	ListSubnets(ctx context.Context) ([]store.Subnet, error)
}

// Store is every role the server's parts need.
type Store interface {
	HubStore
	NodeStore
	BudgetStore
	AdminStore
	PodNetworkStore
}

var (
	_ HubStore    = (*store.Store)(nil)
	_ NodeStore   = (*store.Store)(nil)
	_ BudgetStore = (*store.Store)(nil)
	_ AdminStore  = (*store.Store)(nil)
	_ Store       = (*store.Store)(nil)
)

// LeaderInfo names the replica that currently runs the engine
// (broker/leader's Elector).
type LeaderInfo interface {
	Leader(ctx context.Context) (string, error)
}

// LimitsSource knows instance types' ENI limits. Register uses it to record
// how many ENIs and addresses a node may have; without one (or for an
// unknown type) the node's limits stay as the engine records them.
type LimitsSource interface {
	Limits(ctx context.Context, instanceType string) (planner.Limits, bool, error)
}

// InstanceTypes is EC2's DescribeInstanceTypes, for GetMaxPods.
type InstanceTypes interface {
	DescribeInstanceTypes(ctx context.Context, types []string) (map[string]ec2client.InstanceTypeInfo, error)
}

var _ InstanceTypes = (*ec2client.Client)(nil)

// RecentLogs returns a process's latest log records, JSON lines oldest
// first (logring.Ring).
type RecentLogs interface {
	Lines() []byte
}

// Checker compares the sources of truth for `allotctl check`
// (broker/check); staleAfter <= 0 means its default.
type Checker interface {
	Check(ctx context.Context, staleAfter time.Duration) (*allotv1.CheckResponse, error)
}
