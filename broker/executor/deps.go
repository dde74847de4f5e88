package executor

import (
	"context"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/store"
)

// Store is the part of the broker's etcd store the engine uses. Declared here,
// by its consumer, so the engine's dependence on etcd is visible in one place.
type Store interface {
	PutSubnet(ctx context.Context, sn store.Subnet) (store.Subnet, error)
	SetUsedByOthers(ctx context.Context, id string, n int64) (store.Subnet, error)
	ListSubnets(ctx context.Context) ([]store.Subnet, error)

	GetNode(ctx context.Context, id string) (store.Node, error)
	ListNodes(ctx context.Context) ([]store.Node, error)
	PutNode(ctx context.Context, n store.Node) (store.Node, error)
	ListDemands(ctx context.Context) (map[string]store.Demand, error)
	ListUsage(ctx context.Context) (map[string]store.Usage, error)

	PutPrimaryENI(ctx context.Context, e store.ENI) error
	GetENI(ctx context.Context, id string) (store.ENI, error)
	ListENIs(ctx context.Context) ([]store.ENI, error)

	BeginIntent(ctx context.Context, in store.Intent) (store.Intent, error)
	GetIntent(ctx context.Context, id string) (store.Intent, error)
	ListIntents(ctx context.Context) ([]store.Intent, error)
	ListOpenIntents(ctx context.Context) ([]store.Intent, error)
	PruneIntents(ctx context.Context, olderThan time.Time) (int, error)
	CompleteCreate(ctx context.Context, intentID string, eni store.ENI) error
	CompleteAttach(ctx context.Context, intentID, eniID string, deviceIndex int) error
	CompleteModify(ctx context.Context, intentID string) error
	CompleteAssign(ctx context.Context, intentID, eniID string, addrs, prefixes []string) error
	CompleteUnassign(ctx context.Context, intentID, eniID string, addrs, prefixes []string) error
	CompleteDetach(ctx context.Context, intentID, eniID string) error
	CompleteDelete(ctx context.Context, intentID, eniID string) error
	FailIntent(ctx context.Context, intentID string, cause error) error

	ProposeRelease(ctx context.Context, r store.Release) (store.Release, error)
	ListReleases(ctx context.Context, instanceID string) ([]store.Release, error)
	FinishRelease(ctx context.Context, id string) error
	CancelRelease(ctx context.Context, id string) error
	PruneReleases(ctx context.Context, olderThan time.Time) (int, error)

	Watch(ctx context.Context) <-chan int64
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
	DescribeSubnets(ctx context.Context, ids []string) ([]ec2client.SubnetInfo, error)
	DescribeInstanceTypes(ctx context.Context, types []string) (map[string]ec2client.InstanceTypeInfo, error)
}

var (
	_ Store = (*store.Store)(nil)
	_ EC2   = (*ec2client.Client)(nil)
)
