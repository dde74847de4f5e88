// Package instances keeps what planning needs to know about the nodes and
// a registration does not carry: instance types' ENI limits, the records of
// the nodes' subnets and each node's primary ENI. It describes them from
// EC2 in batches (one call per kind per pass), records them in etcd, and
// remembers failures so a bad ID is not described on every pass. It is the
// engine's cache of EC2's facts about instances, apart from the engine's
// own work.
package instances

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
)

// Store is the part of the broker's store the manager writes: node limits
// and primary ENIs, and subnet records.
type Store interface {
	GetNode(ctx context.Context, id string) (store.Node, error)
	PutNode(ctx context.Context, n store.Node) (store.Node, error)
	PutSubnet(ctx context.Context, sn store.Subnet) (store.Subnet, error)
	SetUsedByOthers(ctx context.Context, id string, n int64) (store.Subnet, error)
	PutPrimaryENI(ctx context.Context, e store.ENI) error
}

// EC2 is the part of the EC2 client the manager describes with.
type EC2 interface {
	DescribeInstanceTypes(ctx context.Context, types []string) (map[string]ec2client.InstanceTypeInfo, error)
	DescribeSubnets(ctx context.Context, ids []string) ([]ec2client.SubnetInfo, error)
	DescribeENIs(ctx context.Context, in ec2client.DescribeENIsInput) ([]ec2client.ENIInfo, error)
}

var (
	_ Store = (*store.Store)(nil)
	_ EC2   = (*ec2client.Client)(nil)
)

// Manager describes and records the nodes' instance facts. It is safe for
// concurrent use.
type Manager struct {
	st    Store
	ec2   EC2
	retry time.Duration

	mu     sync.Mutex
	types  map[string]planner.Limits
	failed map[string]time.Time // what a describe did not find -> not again before

	// passing is set while a pass StartEnsure started runs.
	passing atomic.Bool
	passes  sync.WaitGroup
}

// New returns a manager that describes through ec2 and records in st; a
// describe that did not find something is not repeated for retry.
func New(st Store, ec2 EC2, retry time.Duration) *Manager {
	return &Manager{st: st, ec2: ec2, retry: retry, types: map[string]planner.Limits{}, failed: map[string]time.Time{}}
}

// View is the state a pass works from: the nodes, the subnets recorded,
// and whether a node's primary ENI is recorded.
type View struct {
	Nodes      []store.Node
	Subnets    map[string]store.Subnet
	HasPrimary func(instanceID string) bool
}

// Ensure describes what the view lacks and records it. It reports whether
// it wrote anything (the caller reads its state again).
func (m *Manager) Ensure(ctx context.Context, v View, now time.Time) (bool, error) {
	c1, err1 := m.ensureLimits(ctx, v.Nodes, now)
	c2, err2 := m.ensureSubnets(ctx, v, now)
	c3, err3 := m.ensurePrimaries(ctx, v, now)
	return c1 || c2 || c3, errors.Join(err1, err2, err3)
}

// Limits returns the planner's limits for a node: its described instance
// type, or what the node record says when the type was not described.
func (m *Manager) Limits(n store.Node) (planner.Limits, bool) {
	if l, ok := m.cached(n.InstanceType); ok {
		return l, true
	}
	if n.IPv4PerENI > 0 && n.MaxENIs > 0 && !n.PrefixMode() {
		return planner.Limits{MaxENIs: n.MaxENIs, IPv4PerENI: n.IPv4PerENI}, true
	}
	return planner.Limits{}, false
}

// ensureLimits describes the instance types whose limits are missing from a
// node record (or, in prefix mode, whose Nitro-ness is unknown) and records
// the limits on the nodes.
func (m *Manager) ensureLimits(ctx context.Context, nodes []store.Node, now time.Time) (bool, error) {
	var errs []error
	if err := m.describeTypes(ctx, nodes, now); err != nil {
		errs = append(errs, err)
	}
	changed := false
	for _, n := range nodes {
		l, ok := m.cached(n.InstanceType)
		if !ok || (n.IPv4PerENI > 0 && n.MaxENIs > 0) {
			continue
		}
		// Re-read right before writing: PutNode is last-writer-wins and a
		// registration may have just changed the node.
		cur, err := m.st.GetNode(ctx, n.InstanceID)
		if err != nil {
			errs = append(errs, fmt.Errorf("read node %s: %w", n.InstanceID, err))
			continue
		}
		cur.IPv4PerENI = l.IPv4PerENI
		if cur.MaxENIs <= 0 || cur.MaxENIs > l.MaxENIs {
			cur.MaxENIs = l.MaxENIs
		}
		if _, err := m.st.PutNode(ctx, cur); err != nil {
			errs = append(errs, fmt.Errorf("record limits of %s: %w", n.InstanceID, err))
			continue
		}
		changed = true
	}
	return changed, errors.Join(errs...)
}

func (m *Manager) describeTypes(ctx context.Context, nodes []store.Node, now time.Time) error {
	var types []string
	seen := map[string]bool{}
	for _, n := range nodes {
		t := n.InstanceType
		if t == "" || seen[t] || !m.due("type:"+t, now) {
			continue
		}
		if _, ok := m.cached(t); ok {
			continue
		}
		if n.IPv4PerENI == 0 || n.MaxENIs == 0 || n.PrefixMode() {
			seen[t] = true
			types = append(types, t)
		}
	}
	if len(types) == 0 {
		return nil
	}
	sort.Strings(types)
	infos, err := m.ec2.DescribeInstanceTypes(ctx, types)
	if err != nil {
		err = fmt.Errorf("describe instance types %v: %w", types, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range types {
		if x, ok := infos[t]; ok {
			m.types[t] = planner.Limits{MaxENIs: x.MaxENIs, IPv4PerENI: x.IPv4PerENI, PrefixCapable: x.Nitro}
		} else {
			m.failed["type:"+t] = now.Add(m.retry)
		}
	}
	return err
}

func (m *Manager) cached(t string) (planner.Limits, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.types[t]
	return l, ok
}

// due reports whether key may be described again.
func (m *Manager) due(key string, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !now.Before(m.failed[key])
}

// missed marks keys not found, so they are described again only after
// the retry delay.
func (m *Manager) missed(now time.Time, keys ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		m.failed[k] = now.Add(m.retry)
	}
}
