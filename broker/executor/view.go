package executor

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/allotnet/allot/broker/store"
)

// view is the engine's copy of the records it plans from, kept current by
// a store.Follower: one full read, then the changes of an etcd watch in
// the order etcd applied them. A round builds its snapshot from the view
// instead of reading the whole state again; it first waits for the view
// to reach the engine's own latest write, so it never plans from a state
// older than what it just did. Only the engine's Run goroutine touches it.
//
// The view keeps the snapshot's indexes as changes arrive (each node's
// ENIs in device order, its releases oldest first, the sorted node list)
// and lends its maps to the snapshot instead of copying them: a map lent
// to a snapshot is copied once, at the next change to it, so a snapshot
// never sees a later change. The maps that change between every two
// rounds of a burst (demands, usage, ENIs) are split in parts (cowShards)
// and only a part that changed is copied, so a round costs the records
// that changed since the last one, not the whole cluster.
type view struct {
	// live is false until the first full read and after a break in the
	// watch (until the next full read).
	live bool
	rev  int64
	// behindSince is when the rounds began to find the view live but
	// behind the engine's own latest write (zero while it keeps up).
	behindSince time.Time

	nodes map[string]store.Node
	// demands, usage and enis change between every two rounds of a
	// burst; they are lent part by part (cowShards).
	demands  *cowShards[store.Demand]
	usage    *cowShards[store.Usage]
	subnets  map[string]store.Subnet
	enis     *cowShards[store.ENI]
	releases map[string]store.Release
	podnets  map[string]store.PodNetwork
	// intents are the open intents: the engine's own and every other
	// writer's (the reconciler's, a previous leader's), followed like the
	// rest instead of read in full.
	intents map[string]store.Intent
	// finished are the done and failed intents etcd still keeps, with
	// what pruning them needs (store.Records.Finished), so a prune need
	// not read every intent.
	finished map[string]store.Intent
	// bad holds the records that do not decode, by kind and id.
	bad map[store.RecordKind]map[string]store.Quarantined

	// byNode is each instance's ENIs sorted by device index, then ID;
	// relsOf its releases oldest first. A slice is replaced, never
	// changed, so a snapshot may hold it.
	byNode *cowShards[[]store.ENI]
	relsOf map[string][]store.Release
	// unsettled counts each instance's ENIs that upkeep has work for
	// (unsettledENI).
	unsettled map[string]int
	// sorted and registered are built again only after a node record or
	// a set-aside record changed (nil until then).
	sorted     []store.Node
	registered map[string]bool
	// lent are the maps the last snapshot holds.
	lent lentMaps
}

// lentMaps says which of the view's maps a snapshot holds.
type lentMaps struct{ nodes, subnets, relsOf, unsettled bool }

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
	v.nodes = byID(r.Nodes, func(n store.Node) string { return n.InstanceID })
	v.demands = newCOWShards(byID(r.Demands, func(d store.Demand) string { return d.InstanceID }))
	v.usage = newCOWShards(byID(r.Usage, func(u store.Usage) string { return u.InstanceID }))
	v.subnets = byID(r.Subnets, func(sn store.Subnet) string { return sn.ID })
	v.enis = newCOWShards(byID(r.ENIs, func(x store.ENI) string { return x.ID }))
	v.releases = byID(r.Releases, func(rel store.Release) string { return rel.ID })
	v.podnets = byID(r.PodNetworks, func(pn store.PodNetwork) string { return pn.Name })
	v.intents = byID(r.Intents, func(in store.Intent) string { return in.ID })
	v.finished = byID(r.Finished, func(in store.Intent) string { return in.ID })
	v.bad = map[store.RecordKind]map[string]store.Quarantined{}
	for _, q := range r.Quarantined {
		v.setBad(store.RecordKind(q.Kind), q.ID, &q)
	}
	v.byNode, v.relsOf = newCOWShards(enisByNode(r.ENIs)), map[string][]store.Release{}
	v.unsettled = unsettledOf(r.ENIs)
	for _, rel := range r.Releases {
		v.relsOf[rel.InstanceID] = append(v.relsOf[rel.InstanceID], rel)
	}
	for _, l := range v.relsOf {
		slices.SortFunc(l, releaseOrder)
	}
	v.sorted, v.registered, v.lent = nil, nil, lentMaps{}
}

func byID[T any](l []T, id func(T) string) map[string]T {
	m := make(map[string]T, len(l))
	for _, x := range l {
		m[id(x)] = x
	}
	return m
}

// eniOrder is a node's ENIs' order in a snapshot: by device index (none
// attached yet share index 0), then by ID.
func eniOrder(a, b store.ENI) int {
	return cmp.Or(cmp.Compare(a.DeviceIndex, b.DeviceIndex), strings.Compare(a.ID, b.ID))
}

// releaseOrder is a node's releases' order in a snapshot: oldest first.
func releaseOrder(a, b store.Release) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
}

// setBad records or clears a record that does not decode, and reports
// whether that changed anything.
func (v *view) setBad(kind store.RecordKind, id string, q *store.Quarantined) bool {
	if q == nil {
		_, had := v.bad[kind][id]
		delete(v.bad[kind], id)
		return had
	}
	if v.bad[kind] == nil {
		v.bad[kind] = map[string]store.Quarantined{}
	}
	v.bad[kind][id] = *q
	return true
}

// own makes *m the view's own before a change: a map lent to a snapshot is
// copied first.
func own[T any](m *map[string]T, lent *bool) {
	if *lent {
		*m, *lent = maps.Clone(*m), false
	}
}

// apply applies one change.
func (v *view) apply(c store.Change) {
	var bad *store.Quarantined
	if c.Quarantined != "" {
		bad = &store.Quarantined{Kind: string(c.Kind), ID: c.ID, Key: c.Key, Err: c.Quarantined}
	}
	if v.setBad(c.Kind, c.ID, bad) {
		v.sorted, v.registered = nil, nil
	}
	switch c.Kind {
	case store.RecordNode:
		own(&v.nodes, &v.lent.nodes)
		putOrDelete(v.nodes, c)
		v.sorted, v.registered = nil, nil
	case store.RecordDemand:
		putOrDeleteShard(v.demands, c)
	case store.RecordUsage:
		putOrDeleteShard(v.usage, c)
	case store.RecordSubnet:
		own(&v.subnets, &v.lent.subnets)
		putOrDelete(v.subnets, c)
	case store.RecordENI:
		v.applyENI(c)
	case store.RecordRelease:
		v.applyRelease(c)
	case store.RecordPodNetwork:
		putOrDelete(v.podnets, c)
	case store.RecordIntent:
		v.applyIntent(c)
	}
}

// applyIntent keeps an open intent whole and a finished one (done and
// failed ones stay in etcd until pruned, but nothing plans from them) as
// much as pruning needs.
func (v *view) applyIntent(c store.Change) {
	delete(v.intents, c.ID)
	delete(v.finished, c.ID)
	in, ok := c.Record.(store.Intent)
	switch {
	case !ok || c.Deleted:
	case in.State == store.IntentOpen:
		v.intents[c.ID] = in
	default:
		v.finished[c.ID] = in.Pruning()
	}
}

// prunable returns the finished intents that finished before olderThan.
func (v *view) prunable(olderThan time.Time) []store.Intent {
	var out []store.Intent
	for _, in := range v.finished {
		if store.Prunable(in, olderThan) {
			out = append(out, in)
		}
	}
	slices.SortFunc(out, store.IntentOrder)
	return out
}

// applyENI applies an ENI's change to the records and to its node's list.
func (v *view) applyENI(c store.Change) {
	old, had := v.enis.get(c.ID)
	putOrDeleteShard(v.enis, c)
	cur, has := v.enis.get(c.ID)
	eniID := func(x store.ENI) string { return x.ID }
	was, is := had && unsettledENI(&old), has && unsettledENI(&cur)
	if was != is || was && old.InstanceID != cur.InstanceID {
		own(&v.unsettled, &v.lent.unsettled)
		if was {
			countIn(v.unsettled, old.InstanceID, -1)
		}
		if is {
			countIn(v.unsettled, cur.InstanceID, 1)
		}
	}
	if had {
		l, _ := v.byNode.get(old.InstanceID)
		if l = replacedIn(l, c.ID, nil, eniOrder, eniID); len(l) > 0 {
			v.byNode.set(old.InstanceID, l)
		} else {
			v.byNode.del(old.InstanceID)
		}
	}
	if has {
		l, _ := v.byNode.get(cur.InstanceID)
		v.byNode.set(cur.InstanceID, replacedIn(l, c.ID, &cur, eniOrder, eniID))
	}
}

// applyRelease applies a release's change to the records and to its
// node's list.
func (v *view) applyRelease(c store.Change) {
	own(&v.relsOf, &v.lent.relsOf)
	old, had := v.releases[c.ID]
	putOrDelete(v.releases, c)
	cur, has := v.releases[c.ID]
	if had {
		v.relsOf[old.InstanceID] = replaced(v.relsOf, old.InstanceID, c.ID, nil, releaseOrder, func(r store.Release) string { return r.ID })
	}
	if has {
		v.relsOf[cur.InstanceID] = replaced(v.relsOf, cur.InstanceID, c.ID, &cur, releaseOrder, func(r store.Release) string { return r.ID })
	}
	dropEmpty(v.relsOf, old.InstanceID)
}

// replaced returns a new list of owner's records: the old one without the
// record id, with rec added if not nil, in order. The old list is left as
// it was, for the snapshots that hold it.
func replaced[T any](idx map[string][]T, owner, id string, rec *T, order func(a, b T) int, idOf func(T) string) []T {
	return replacedIn(idx[owner], id, rec, order, idOf)
}

// replacedIn is replaced for the list old.
func replacedIn[T any](old []T, id string, rec *T, order func(a, b T) int, idOf func(T) string) []T {
	out := make([]T, 0, len(old)+1)
	for _, x := range old {
		if idOf(x) != id {
			out = append(out, x)
		}
	}
	if rec != nil {
		out = append(out, *rec)
	}
	slices.SortFunc(out, order)
	return out
}

func dropEmpty[T any](idx map[string][]T, owner string) {
	if l, ok := idx[owner]; ok && len(l) == 0 {
		delete(idx, owner)
	}
}

func putOrDeleteShard[T any](m *cowShards[T], c store.Change) {
	if r, ok := c.Record.(T); ok && !c.Deleted {
		m.set(c.ID, r)
	} else {
		m.del(c.ID)
	}
}

func putOrDelete[T any](m map[string]T, c store.Change) {
	if r, ok := c.Record.(T); ok && !c.Deleted {
		m[c.ID] = r
	} else {
		delete(m, c.ID)
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

// snapshot builds a round's snapshot from the view, equal to the one load
// builds from a full read. It holds the view's maps and lists; the view
// copies a lent map before it next changes it, so the actions a round
// queues read the round's state however far the view has moved on.
func (v *view) snapshot(open []store.Intent) *snapshot {
	s := &snapshot{open: map[string][]store.Intent{}, openENI: map[string]bool{}}
	s.quarantined, s.badSubnets = map[string]store.Quarantined{}, map[string]store.Quarantined{}
	// A node set aside for several records is reported for the first
	// kind in planned's order.
	for _, k := range planned {
		for id, q := range v.bad[k] {
			if k == store.RecordSubnet {
				s.badSubnets[id] = q
			} else if _, ok := s.quarantined[id]; !ok {
				s.quarantined[id] = q
			}
		}
	}
	v.index(s.quarantined)
	s.nodes, s.registered = v.sorted, v.registered
	s.node = v.nodes
	if len(s.quarantined) > 0 {
		s.node = make(map[string]store.Node, len(s.nodes))
		for _, n := range s.nodes {
			s.node[n.InstanceID] = n
		}
	}
	s.subnets, s.releases, s.unsettled = v.subnets, v.relsOf, v.unsettled
	s.demands, s.usage, s.enis, s.byNode = v.demands.lend(), v.usage.lend(), v.enis.lend(), v.byNode.lend()
	v.lent = lentMaps{nodes: true, subnets: true, relsOf: true, unsettled: true}
	for _, name := range sortedIDs(v.podnets) {
		s.podnets = append(s.podnets, v.podnets[name])
	}
	for _, in := range open {
		s.open[in.InstanceID] = append(s.open[in.InstanceID], in)
		if in.ENIID != "" {
			s.openENI[in.ENIID] = true
		}
	}
	return s
}

// index builds the sorted list of sound nodes and the set of registered
// instances again if a node or a set-aside record changed since.
func (v *view) index(quarantined map[string]store.Quarantined) {
	if v.sorted != nil || v.registered != nil {
		return
	}
	v.registered = make(map[string]bool, len(v.nodes)+len(v.bad[store.RecordNode]))
	for id := range v.bad[store.RecordNode] {
		v.registered[id] = true
	}
	var sorted []store.Node
	for _, id := range sortedIDs(v.nodes) {
		v.registered[id] = true
		if _, bad := quarantined[id]; !bad {
			sorted = append(sorted, v.nodes[id])
		}
	}
	v.sorted = sorted
}

// catchUpWait bounds how long a round waits for the view to reach the
// engine's latest write.
const catchUpWait = time.Second

// behindRead is how long the view may stay live but behind the engine's
// own writes before a round reads the state in full instead of waiting
// for it; and then the least time between two such reads.
const behindRead = 15 * time.Second

// errBehind says the round did not plan: the view follows etcd but has
// not reached the engine's latest write.
var errBehind = errors.New("the followed view is behind the engine's latest write")

// current returns the round's snapshot: built from the view (open intents
// included) when it is live and holds the engine's latest write, else read
// in full from etcd, with the open intents from the store's mirror
// (refreshIntents). ph is charged with the wait and the read.
//
// A view that is live but behind (etcd delivers its watch late when it is
// busy) gets no full read for behindRead: the round returns errBehind and
// plans nothing, and the next one waits for the view again. Reading every
// record (a 5,000-node cluster's nodes, ENIs, usage and demands: tens of
// megabytes to read and decode) is the most a round can ask of an etcd
// that is already late, and a round cannot plan from a view without its
// own latest intents. A view that has stopped following (not live) is read
// in full at once, as before.
func (e *Engine) current(ctx context.Context, ph *roundPhases) (*snapshot, error) {
	caught := e.caughtUp(ctx)
	ph.mark(phaseCatchUp)
	defer ph.mark(phaseRead)
	if caught {
		e.view.behindSince = time.Time{}
		return e.view.snapshot(e.view.openIntents()), nil
	}
	if e.viewLive() {
		now := e.cfg.Clock.Now()
		if e.view.behindSince.IsZero() {
			e.view.behindSince = now
		}
		if now.Sub(e.view.behindSince) < behindRead {
			e.count(func(s *Stats) { s.Behind++ })
			return nil, errBehind
		}
		e.view.behindSince = now
	}
	e.count(func(s *Stats) { s.FullReads++ })
	return e.load(ctx)
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
