package server

import (
	"context"
	"time"

	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Store is what the gRPC services need from broker/store. Every replica
// serves from etcd through it, so a standby answers exactly as the leader
// does.
type Store interface {
	// Client and Prefix give the health check and snapshot revisions a
	// cheap read of their own.
	Client() *clientv3.Client
	Prefix() string
	// Follow keeps the watch streams' copy of the records current.
	Follow(ctx context.Context) *store.Follower

	PutNode(ctx context.Context, n store.Node) (store.Node, error)
	GetNode(ctx context.Context, id string) (store.Node, error)
	ListNodes(ctx context.Context) ([]store.Node, error)
	PutDemand(ctx context.Context, d store.Demand) error
	ListDemands(ctx context.Context) (map[string]store.Demand, error)
	PutUsage(ctx context.Context, u store.Usage) (bool, error)
	ListUsage(ctx context.Context) (map[string]store.Usage, error)
	KeepAlive(ctx context.Context, instanceID string, ttl time.Duration) error
	ListNodeStatus(ctx context.Context) (map[string]store.NodeStatus, error)
	Alive(ctx context.Context) (map[string]bool, error)

	ListENIs(ctx context.Context) ([]store.ENI, error)
	ListNodeENIs(ctx context.Context, instanceID string) ([]store.ENI, error)
	ListOpenIntents(ctx context.Context) ([]store.Intent, error)

	AckRelease(ctx context.Context, instanceID, releaseID string, addrs, prefixes []string) (store.Release, error)
	ListReleases(ctx context.Context, instanceID string) ([]store.Release, error)

	GetSubnet(ctx context.Context, id string) (store.Subnet, error)
	ListSubnets(ctx context.Context) ([]store.Subnet, error)
	SetSubnetBudget(ctx context.Context, id string, headroom, cap int64) (store.Subnet, error)
}

var _ Store = (*store.Store)(nil)

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
