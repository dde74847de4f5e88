package server

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"google.golang.org/protobuf/proto"
)

// mirror is the hub's copy of the records the streams are computed from,
// kept current from the store's Follower: a full read, then one change at
// a time. It remembers which nodes a change may have touched, so that
// publishing costs what changed, not the cluster. Only the hub's loop uses
// it.
type mirror struct {
	rev      int64
	subnets  map[string]store.Subnet
	nodes    map[string]store.Node
	enis     map[string]store.ENI
	usage    map[string]store.Usage
	releases map[string]store.Release
	statuses map[string]store.NodeStatus
	podnets  map[string]store.PodNetwork
	cidrs    map[string]string          // subnet ID -> CIDR, for the ENI messages
	enisOf   map[string]map[string]bool // instance ID -> its ENI IDs
	relsOf   map[string]map[string]bool // instance ID -> its release IDs

	dirty   map[string]bool // instances whose state may differ from the published one
	changed bool            // any record changed since the last publish
}

func newMirror() *mirror {
	m := &mirror{dirty: map[string]bool{}}
	m.reset(&store.Records{})
	return m
}

// reset replaces everything with a full read. Every instance known before
// or after is dirty: publishing compares and keeps what did not change.
func (m *mirror) reset(r *store.Records) {
	m.markAll()
	m.rev = r.Rev
	m.subnets = make(map[string]store.Subnet, len(r.Subnets))
	m.cidrs = make(map[string]string, len(r.Subnets))
	for _, s := range r.Subnets {
		m.subnets[s.ID], m.cidrs[s.ID] = s, s.CIDR
	}
	m.podnets = make(map[string]store.PodNetwork, len(r.PodNetworks))
	for _, pn := range r.PodNetworks {
		m.podnets[pn.Name] = pn
	}
	m.nodes = make(map[string]store.Node, len(r.Nodes))
	for _, n := range r.Nodes {
		m.nodes[n.InstanceID] = n
	}
	m.enis, m.enisOf = make(map[string]store.ENI, len(r.ENIs)), map[string]map[string]bool{}
	for _, e := range r.ENIs {
		m.putENI(e)
	}
	m.usage = make(map[string]store.Usage, len(r.Usage))
	for _, u := range r.Usage {
		m.usage[u.InstanceID] = u
	}
	m.releases, m.relsOf = make(map[string]store.Release, len(r.Releases)), map[string]map[string]bool{}
	for _, rel := range r.Releases {
		m.putRelease(rel)
	}
	m.statuses = make(map[string]store.NodeStatus, len(r.Statuses))
	for _, st := range r.Statuses {
		m.statuses[st.InstanceID] = st
	}
	m.markAll()
	m.changed = true
}

// markAll marks every instance the mirror knows dirty.
func (m *mirror) markAll() {
	for id := range m.nodes {
		m.dirty[id] = true
	}
	for id := range m.enisOf {
		m.dirty[id] = true
	}
	for id := range m.relsOf {
		m.dirty[id] = true
	}
	for id := range m.statuses {
		m.dirty[id] = true
	}
}

// advance records that every change up to rev is applied.
func (m *mirror) advance(rev int64) { m.rev = max(m.rev, rev) }

// apply applies one change and marks the instances it touches.
func (m *mirror) apply(c store.Change) {
	if c.Kind == store.RecordDemand {
		return // the engine's, not the streams'
	}
	m.changed = true
	switch c.Kind {
	case store.RecordSubnet:
		sn, ok := c.Record.(store.Subnet)
		if c.Deleted || !ok {
			delete(m.subnets, c.ID)
		} else {
			m.subnets[c.ID] = sn
		}
		// The counters change with every intent; only a CIDR change
		// reaches the nodes' messages.
		if sn.CIDR != m.cidrs[c.ID] {
			if sn.CIDR == "" {
				delete(m.cidrs, c.ID)
			} else {
				m.cidrs[c.ID] = sn.CIDR
			}
			for _, e := range m.enis {
				if e.SubnetID == c.ID {
					m.dirty[e.InstanceID] = true
				}
			}
		}
	case store.RecordPodNetwork:
		// Where nodes' pods go moves only the budget figures, not any
		// node's message.
		if pn, ok := c.Record.(store.PodNetwork); ok && !c.Deleted {
			m.podnets[c.ID] = pn
		} else {
			delete(m.podnets, c.ID)
		}
	case store.RecordNode:
		if n, ok := c.Record.(store.Node); ok && !c.Deleted {
			m.nodes[c.ID] = n
		} else {
			delete(m.nodes, c.ID)
		}
		m.dirty[c.ID] = true
	case store.RecordENI:
		m.dropENI(c.ID)
		if e, ok := c.Record.(store.ENI); ok && !c.Deleted {
			m.putENI(e)
		}
	case store.RecordUsage:
		// Usage reaches the budget figures, not the nodes' messages.
		if u, ok := c.Record.(store.Usage); ok && !c.Deleted {
			m.usage[c.ID] = u
		} else {
			delete(m.usage, c.ID)
		}
	case store.RecordRelease:
		m.dropRelease(c.ID)
		if r, ok := c.Record.(store.Release); ok && !c.Deleted {
			m.putRelease(r)
		}
	case store.RecordStatus:
		if st, ok := c.Record.(store.NodeStatus); ok && !c.Deleted {
			m.statuses[c.ID] = st
		} else {
			delete(m.statuses, c.ID)
		}
		m.dirty[c.ID] = true
	}
}

func (m *mirror) putENI(e store.ENI) {
	m.enis[e.ID] = e
	addTo(m.enisOf, e.InstanceID, e.ID)
	m.dirty[e.InstanceID] = true
}

func (m *mirror) dropENI(id string) {
	if old, ok := m.enis[id]; ok {
		delete(m.enis, id)
		removeFrom(m.enisOf, old.InstanceID, id)
		m.dirty[old.InstanceID] = true
	}
}

func (m *mirror) putRelease(r store.Release) {
	m.releases[r.ID] = r
	addTo(m.relsOf, r.InstanceID, r.ID)
	m.dirty[r.InstanceID] = true
}

func (m *mirror) dropRelease(id string) {
	if old, ok := m.releases[id]; ok {
		delete(m.releases, id)
		removeFrom(m.relsOf, old.InstanceID, id)
		m.dirty[old.InstanceID] = true
	}
}

func addTo(idx map[string]map[string]bool, owner, id string) {
	if idx[owner] == nil {
		idx[owner] = map[string]bool{}
	}
	idx[owner][id] = true
}

func removeFrom(idx map[string]map[string]bool, owner, id string) {
	delete(idx[owner], id)
	if len(idx[owner]) == 0 {
		delete(idx, owner)
	}
}

// nodeState is one instance's published state: what WatchNode sends it
// and what ReportUsage checks its addresses against. It is never changed
// once published; a newer one replaces it and closes replaced.
type nodeState struct {
	registered bool
	name       string      // the Kubernetes node name it registered with
	enis       []store.ENI // sorted by ID
	ev         *allotv1.NodeEvent
	replaced   chan struct{}
}

// state computes an instance's state from the mirror; nil when the mirror
// holds nothing of it.
func (m *mirror) state(id string) *nodeState {
	n, registered := m.nodes[id]
	enis := make([]store.ENI, 0, len(m.enisOf[id]))
	for eid := range m.enisOf[id] {
		enis = append(enis, m.enis[eid])
	}
	slices.SortFunc(enis, func(a, b store.ENI) int { return strings.Compare(a.ID, b.ID) })
	var open []store.Release
	for rid := range m.relsOf[id] {
		if r := m.releases[rid]; r.State == store.ReleaseProposed || r.State == store.ReleaseAcked {
			open = append(open, r)
		}
	}
	slices.SortFunc(open, releaseOrder)
	st, hasStatus := m.statuses[id]
	if !registered && len(enis) == 0 && len(open) == 0 && !hasStatus {
		return nil
	}
	return &nodeState{
		registered: registered,
		name:       n.NodeName,
		enis:       enis,
		ev:         nodeEvent(n, enis, open, st, m.cidrs),
		replaced:   make(chan struct{}),
	}
}

// same reports whether two states would answer every question alike.
func (ns *nodeState) same(o *nodeState) bool {
	if ns == nil || o == nil {
		return ns == o
	}
	// The event carries every ENI with its addresses and prefixes, which
	// is all the ownership check reads.
	return ns.registered == o.registered && ns.name == o.name && proto.Equal(ns.ev, o.ev)
}

// releaseOrder is the store's listing order: oldest first.
func releaseOrder(a, b store.Release) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
}

// flat builds the whole view the budget figures need, in the store's
// listing orders. It costs the cluster, so the hub builds it only while a
// budget stream watches.
func (m *mirror) flat() *view {
	v := &view{
		rev:      m.rev,
		subnets:  sortedValues(m.subnets, func(a, b store.Subnet) int { return strings.Compare(a.ID, b.ID) }),
		nodes:    sortedValues(m.nodes, func(a, b store.Node) int { return strings.Compare(a.InstanceID, b.InstanceID) }),
		enis:     sortedValues(m.enis, func(a, b store.ENI) int { return strings.Compare(a.ID, b.ID) }),
		usage:    maps.Clone(m.usage),
		releases: sortedValues(m.releases, releaseOrder),
		statuses: maps.Clone(m.statuses),
		podnets:  sortedValues(m.podnets, func(a, b store.PodNetwork) int { return strings.Compare(a.Name, b.Name) }),
	}
	v.index()
	return v
}

func sortedValues[T any](m map[string]T, order func(a, b T) int) []T {
	out := slices.SortedFunc(maps.Values(m), order)
	if out == nil {
		out = []T{}
	}
	return out
}
