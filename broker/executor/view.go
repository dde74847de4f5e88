package executor

import (
	"context"
	"slices"
	"time"

	"github.com/allotnet/allot/broker/store"
)

// view is the engine's copy of the records it plans from, kept current by
// a store.Follower: one full read, then the changes of an etcd watch in
// the order etcd applied them. A round builds its snapshot from the view
// instead of reading the whole state again; it first waits for the view
// to reach the engine's own latest write, so it never plans from a state
// older than what it just did. Only the engine's Run goroutine touches it.
type view struct {
	// live is false until the first full read and after a break in the
	// watch (until the next full read).
	live bool
	rev  int64

	nodes    map[string]store.Node
	demands  map[string]store.Demand
	usage    map[string]store.Usage
	subnets  map[string]store.Subnet
	enis     map[string]store.ENI
	releases map[string]store.Release
	podnets  map[string]store.PodNetwork
	// intents are the open intents: the engine's own and every other
	// writer's (the reconciler's, a previous leader's), followed like the
	// rest instead of read in full.
	intents map[string]store.Intent
	// bad holds the records that do not decode, by kind and id.
	bad map[store.RecordKind]map[string]store.Quarantined
}

// planned are the kinds whose bad records set a node or subnet aside, as
// ReadPlanning does (a pod network that does not decode is left out).
var planned = []store.RecordKind{store.RecordNode, store.RecordDemand, store.RecordUsage, store.RecordSubnet}

// update applies one message of the follower.
func (v *view) update(u store.FollowUpdate) {
	switch {
	case u.Err != nil:
		v.live = false
	case u.Snapshot != nil:
		v.reset(u.Snapshot)
	}
	for _, c := range u.Changes {
		v.apply(c)
	}
	v.rev = max(v.rev, u.Rev)
}

func (v *view) reset(r *store.Records) {
	v.live, v.rev = true, r.Rev
	v.nodes = make(map[string]store.Node, len(r.Nodes))
	for _, n := range r.Nodes {
		v.nodes[n.InstanceID] = n
	}
	v.demands = make(map[string]store.Demand, len(r.Demands))
	for _, d := range r.Demands {
		v.demands[d.InstanceID] = d
	}
	v.usage = make(map[string]store.Usage, len(r.Usage))
	for _, u := range r.Usage {
		v.usage[u.InstanceID] = u
	}
	v.subnets = make(map[string]store.Subnet, len(r.Subnets))
	for _, sn := range r.Subnets {
		v.subnets[sn.ID] = sn
	}
	v.enis = make(map[string]store.ENI, len(r.ENIs))
	for _, x := range r.ENIs {
		v.enis[x.ID] = x
	}
	v.releases = make(map[string]store.Release, len(r.Releases))
	for _, rel := range r.Releases {
		v.releases[rel.ID] = rel
	}
	v.podnets = make(map[string]store.PodNetwork, len(r.PodNetworks))
	for _, pn := range r.PodNetworks {
		v.podnets[pn.Name] = pn
	}
	v.intents = make(map[string]store.Intent, len(r.Intents))
	for _, in := range r.Intents {
		v.intents[in.ID] = in
	}
	v.bad = map[store.RecordKind]map[string]store.Quarantined{}
	for _, q := range r.Quarantined {
		v.setBad(store.RecordKind(q.Kind), q.ID, &q)
	}
}

func (v *view) setBad(kind store.RecordKind, id string, q *store.Quarantined) {
	if q == nil {
		delete(v.bad[kind], id)
		return
	}
	if v.bad[kind] == nil {
		v.bad[kind] = map[string]store.Quarantined{}
	}
	v.bad[kind][id] = *q
}

// apply applies one change.
func (v *view) apply(c store.Change) {
	var bad *store.Quarantined
	if c.Quarantined != "" {
		bad = &store.Quarantined{Kind: string(c.Kind), ID: c.ID, Key: c.Key, Err: c.Quarantined}
	}
	v.setBad(c.Kind, c.ID, bad)
	switch c.Kind {
	case store.RecordNode:
		putOrDelete(v.nodes, c)
	case store.RecordDemand:
		putOrDelete(v.demands, c)
	case store.RecordUsage:
		putOrDelete(v.usage, c)
	case store.RecordSubnet:
		putOrDelete(v.subnets, c)
	case store.RecordENI:
		putOrDelete(v.enis, c)
	case store.RecordRelease:
		putOrDelete(v.releases, c)
	case store.RecordPodNetwork:
		putOrDelete(v.podnets, c)
	case store.RecordIntent:
		// Only open intents are kept: done and failed ones stay in etcd
		// until pruned, but nothing plans from them.
		if in, ok := c.Record.(store.Intent); ok && !c.Deleted && in.State == store.IntentOpen {
			v.intents[c.ID] = in
		} else {
			delete(v.intents, c.ID)
		}
	}
}

// openIntents returns the open intents, oldest first.
func (v *view) openIntents() []store.Intent {
	out := make([]store.Intent, 0, len(v.intents))
	for _, in := range v.intents {
		out = append(out, in)
	}
	slices.SortFunc(out, store.IntentOrder)
	return out
}

func putOrDelete[T any](m map[string]T, c store.Change) {
	if r, ok := c.Record.(T); ok && !c.Deleted {
		m[c.ID] = r
	} else {
		delete(m, c.ID)
	}
}

// snapshot builds a round's snapshot from the view, as load builds it from
// a full read: its maps are the snapshot's own, since the actions a round
// queues read them after the view has moved on.
func (v *view) snapshot(open []store.Intent) *snapshot {
	s := newSnapshot()
	s.quarantined, s.badSubnets = map[string]store.Quarantined{}, map[string]store.Quarantined{}
	for _, k := range planned {
		for _, id := range sortedIDs(v.bad[k]) {
			q := v.bad[k][id]
			if k == store.RecordSubnet {
				s.badSubnets[id] = q
			} else if _, ok := s.quarantined[id]; !ok {
				s.quarantined[id] = q
			}
		}
	}
	s.registered = map[string]bool{}
	for id := range v.bad[store.RecordNode] {
		s.registered[id] = true
	}
	s.node = make(map[string]store.Node, len(v.nodes))
	if len(v.nodes) > 0 {
		s.nodes = make([]store.Node, 0, len(v.nodes))
	}
	for _, id := range sortedIDs(v.nodes) {
		s.registered[id] = true
		if _, bad := s.quarantined[id]; !bad {
			s.nodes = append(s.nodes, v.nodes[id])
			s.node[id] = v.nodes[id]
		}
	}
	s.demands = make(map[string]store.Demand, len(v.demands))
	for id, d := range v.demands {
		s.demands[id] = d
	}
	s.usage = make(map[string]store.Usage, len(v.usage))
	for id, u := range v.usage {
		s.usage[id] = u
	}
	for id, sn := range v.subnets {
		s.subnets[id] = sn
	}
	for _, name := range sortedIDs(v.podnets) {
		s.podnets = append(s.podnets, v.podnets[name])
	}
	enis := make([]store.ENI, 0, len(v.enis))
	for _, x := range v.enis {
		enis = append(enis, x)
	}
	rels := make([]store.Release, 0, len(v.releases))
	for _, r := range v.releases {
		rels = append(rels, r)
	}
	s.fill(enis, open, rels)
	return s
}

// catchUpWait bounds how long a round waits for the view to reach the
// engine's latest write before it reads the state in full instead.
const catchUpWait = time.Second

// current returns the round's snapshot: built from the view (open intents
// included) when it is live and holds the engine's latest write, else read
// in full from etcd, with the open intents from the store's mirror
// (refreshIntents). ph is charged with the wait and the read.
func (e *Engine) current(ctx context.Context, ph *roundPhases) (*snapshot, error) {
	caught := e.caughtUp(ctx)
	ph.mark(phaseCatchUp)
	defer ph.mark(phaseRead)
	if !caught {
		e.count(func(s *Stats) { s.FullReads++ })
		return e.load(ctx)
	}
	return e.view.snapshot(e.view.openIntents()), nil
}

// viewLive reports whether the engine follows etcd now.
func (e *Engine) viewLive() bool { return e.view != nil && e.view.live }

// caughtUp applies the follower's updates until the view holds the
// engine's own latest write, for catchUpWait at most. Other writers' are
// not waited for: the view may be as old as a full read started a moment
// earlier would be, never older than what the engine did.
func (e *Engine) caughtUp(ctx context.Context) bool {
	if e.view == nil {
		return false
	}
	need := e.written.Rev()
	if e.view.live && e.view.rev >= need {
		return true
	}
	t := time.NewTimer(catchUpWait)
	defer t.Stop()
	for !e.view.live || e.view.rev < need {
		select {
		case u, ok := <-e.updates:
			if !ok {
				return false
			}
			e.view.update(u)
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}
