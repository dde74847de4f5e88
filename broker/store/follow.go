package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// RecordKind names a kind of record a Follower reports. Its value is the
// kind's directory under the cluster prefix.
type RecordKind string

// The kinds a Follower follows: what the broker's read side serves from,
// and the demands the leader's engine plans from. Liveness is left out, and
// intents unless asked for (FollowIntents).
const (
	RecordSubnet  RecordKind = kindSubnets
	RecordNode    RecordKind = kindNodes
	RecordENI     RecordKind = kindENIs
	RecordUsage   RecordKind = kindUsage
	RecordRelease RecordKind = kindReleases
	RecordStatus  RecordKind = kindStatus
	RecordDemand  RecordKind = kindDemand
	// RecordPodNetwork changes only where nodes' pods go, which the
	// budget figures count.
	RecordPodNetwork RecordKind = kindPodNetworks
	// RecordIntent is followed only with FollowIntents: the leader's
	// engine plans from the open ones, the read side needs none.
	RecordIntent RecordKind = kindIntents
)

// Records is every record of the followed kinds at one etcd revision.
type Records struct {
	Rev         int64
	Subnets     []Subnet
	Nodes       []Node
	ENIs        []ENI
	Usage       []Usage
	Releases    []Release
	Statuses    []NodeStatus
	Demands     []Demand
	PodNetworks []PodNetwork
	// Intents are the open intents, oldest first; only with FollowIntents.
	Intents []Intent
	// Finished are the done and failed intents etcd still keeps (until
	// pruned), with only what a prune needs (Intent.Pruning); only with
	// FollowIntents.
	Finished []Intent
	// Quarantined are subnet, node, usage, status, demand and pod network
	// records that do not decode, left out of the lists above (see
	// Planning).
	Quarantined []Quarantined
}

// Change is one followed record written or deleted.
type Change struct {
	Kind    RecordKind
	ID      string
	Key     string // the etcd key
	Deleted bool
	// Record is the new value unless Deleted: a Subnet, Node, ENI, Usage,
	// Release, NodeStatus, PodNetwork, Demand or Intent (the type Kind
	// names) with Rev set. An intent is reported in every state: a
	// reader keeping the open ones drops it when it is done or failed.
	Record any
	// Quarantined, when set, says why a written subnet, node, usage or
	// status record does not decode; the change then reads as Deleted, so
	// a reader sets the record aside instead of stopping for everyone.
	Quarantined string
}

// FollowUpdate is one message of a Follower: a full Snapshot (first, and
// again after every break in the watch), a batch of Changes in the order
// etcd applied them, or only progress. After it, the reader holds every
// change up to and including Rev. Err reports a break (etcd unreachable, a
// record that does not decode); a Snapshot follows once a full read works
// again, and until then the reader's copy is as old as the last Rev.
type FollowUpdate struct {
	Snapshot *Records
	Changes  []Change
	Rev      int64
	Err      error
}

// Follower keeps a reader's copy of the followed records current: one full
// read, then the changes from an etcd watch on the prefix, each record
// decoded once however many readers it serves. Create it with Follow.
type Follower struct {
	s       *Store
	ctx     context.Context // carries the watch stream's metadata, see RequestProgress
	out     chan FollowUpdate
	resync  chan struct{}
	intents bool
}

// FollowOption changes what a Follower follows.
type FollowOption func(*Follower)

// FollowIntents makes the follower report intents too: the open ones in
// every Snapshot, and every write of one as a Change. A full read then
// reads every intent etcd keeps (finished ones stay until pruned), so only
// a reader that plans from them asks for it; after that read the watch
// brings each intent's begin and end once.
func FollowIntents() FollowOption { return func(f *Follower) { f.intents = true } }

// errResync ends a watch so the follower reads everything again.
var errResync = errors.New("store: resync requested")

// Follow starts following. Updates must be read promptly: the follower
// waits for its reader (etcd buffers meanwhile). The channel closes when
// ctx ends.
func (s *Store) Follow(ctx context.Context, opts ...FollowOption) *Follower {
	f := &Follower{
		s:      s,
		ctx:    clientv3.WithRequireLeader(ctx),
		out:    make(chan FollowUpdate),
		resync: make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(f)
	}
	go f.run()
	return f
}

// Updates returns the follower's updates.
func (f *Follower) Updates() <-chan FollowUpdate { return f.out }

// RequestProgress asks etcd to report the current revision on the watch
// once every change up to it has been sent, as an update with no changes.
// A reader that must be at least as new as a revision read elsewhere calls
// it, since writes outside the prefix raise the revision without an event.
// etcd answers only while the watch is caught up, so a reader that hears
// nothing asks again (or calls Resync).
func (f *Follower) RequestProgress() error {
	// The same outgoing metadata as the watch's context selects its stream.
	if err := f.s.cli.RequestProgress(f.ctx); err != nil {
		return fmt.Errorf("request watch progress: %w", err)
	}
	return nil
}

// Resync makes the follower read everything again and send a Snapshot.
func (f *Follower) Resync() {
	select {
	case f.resync <- struct{}{}:
	default:
	}
}

func (f *Follower) run() {
	defer close(f.out)
	var delay time.Duration
	for f.ctx.Err() == nil {
		if delay > 0 {
			select {
			case <-f.ctx.Done():
				return
			case <-time.After(delay):
			}
		}
		// Whatever fails next, don't spin while etcd is unreachable.
		delay = time.Second
		recs, err := f.s.readRecords(f.ctx, f.intents)
		if err != nil {
			if f.ctx.Err() != nil || !f.send(FollowUpdate{Err: err}) {
				return
			}
			continue
		}
		if !f.send(FollowUpdate{Snapshot: recs, Rev: recs.Rev}) {
			return
		}
		err = f.watch(recs.Rev)
		switch {
		case f.ctx.Err() != nil:
			return
		case errors.Is(err, errResync):
			delay = 0
		default:
			delay = 200 * time.Millisecond
			if !f.send(FollowUpdate{Err: err}) {
				return
			}
		}
	}
}

func (f *Follower) send(u FollowUpdate) bool {
	select {
	case f.out <- u:
		return true
	case <-f.ctx.Done():
		return false
	}
}

// watch sends the changes after rev until the watch breaks or a resync is
// asked for.
func (f *Follower) watch(rev int64) error {
	wctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	wch := f.s.cli.Watch(wctx, f.s.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for {
		select {
		case <-f.resync:
			return errResync
		case resp, ok := <-wch:
			if !ok {
				return fmt.Errorf("etcd watch on %s closed", f.s.prefix)
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("etcd watch on %s: %w", f.s.prefix, err)
			}
			if resp.Canceled {
				return fmt.Errorf("etcd watch on %s canceled", f.s.prefix)
			}
			if resp.IsProgressNotify() {
				// Sent only when every change up to it was delivered.
				if !f.send(FollowUpdate{Rev: resp.Header.Revision}) {
					return f.ctx.Err()
				}
				continue
			}
			if len(resp.Events) == 0 {
				continue
			}
			changes, err := f.s.decodeEvents(resp.Events, f.intents)
			if err != nil {
				return err
			}
			// Not the header's revision: while catching up etcd may send
			// part of the events with the revision it has reached.
			last := resp.Events[len(resp.Events)-1].Kv.ModRevision
			if !f.send(FollowUpdate{Changes: changes, Rev: last}) {
				return f.ctx.Err()
			}
		}
	}
}

// readRecords reads every followed record in one transaction, the open
// intents too when asked.
func (s *Store) readRecords(ctx context.Context, intents bool) (*Records, error) {
	dirs := []string{s.dir(kindSubnets), s.dir(kindNodes), s.dir(kindENIs), s.dir(kindUsage),
		s.dir(kindReleases), s.dir(kindStatus), s.dir(kindDemand), s.dir(kindPodNetworks)}
	if intents {
		dirs = append(dirs, s.dir(kindIntents))
	}
	v, err := s.read(ctx, nil, dirs)
	if err != nil {
		return nil, err
	}
	r := &Records{Rev: v.rev}
	if r.Subnets, err = listSound[*Subnet](v, kindSubnets, &r.Quarantined); err != nil {
		return nil, err
	}
	if r.Nodes, err = listSound[*Node](v, kindNodes, &r.Quarantined); err != nil {
		return nil, err
	}
	if r.ENIs, err = list[*ENI](v, kindENIs); err != nil {
		return nil, err
	}
	if r.Usage, err = listSound[*Usage](v, kindUsage, &r.Quarantined); err != nil {
		return nil, err
	}
	if r.Releases, err = list[*Release](v, kindReleases); err != nil {
		return nil, err
	}
	if r.Statuses, err = listSound[*NodeStatus](v, kindStatus, &r.Quarantined); err != nil {
		return nil, err
	}
	if r.Demands, err = listSound[*Demand](v, kindDemand, &r.Quarantined); err != nil {
		return nil, err
	}
	if r.PodNetworks, err = listSound[*PodNetwork](v, kindPodNetworks, &r.Quarantined); err != nil {
		return nil, err
	}
	if intents {
		all, err := list[*Intent](v, kindIntents)
		if err != nil {
			return nil, err
		}
		for _, in := range all {
			if in.State != IntentOpen {
				r.Finished = append(r.Finished, in.Pruning())
			}
		}
		r.Intents = openOldestFirst(all)
	}
	return r, nil
}

// decodeEvents turns watch events into Changes, skipping kinds that are
// not followed (intents unless intents is set). An ENI or release that does not decode fails the batch: a
// reader must never act on a guess, and those cannot be set aside without
// knowing whose they are. A subnet, node, usage or status record names its
// owner in its key: it is set aside (Quarantined, read as deleted).
func (s *Store) decodeEvents(evs []*clientv3.Event, intents bool) ([]Change, error) {
	var out []Change
	for _, ev := range evs {
		key := string(ev.Kv.Key)
		kind, id, ok := strings.Cut(strings.TrimPrefix(key, s.prefix), "/")
		if !ok || id == "" || strings.Contains(id, "/") {
			continue
		}
		c := Change{Kind: RecordKind(kind), ID: id, Key: key, Deleted: ev.Type == mvccpb.DELETE}
		if c.Kind != RecordIntent {
			// The ID is a map key of the engine's view, shared with
			// the IDs records name (intern); an intent's is its own.
			c.ID = intern(id)
		}
		var err error
		switch c.Kind {
		case RecordSubnet:
			c.Record, err = decodeEvent[*Subnet](key, ev, id)
		case RecordNode:
			c.Record, err = decodeEvent[*Node](key, ev, id)
		case RecordENI:
			c.Record, err = decodeEvent[*ENI](key, ev, id)
		case RecordUsage:
			c.Record, err = decodeEvent[*Usage](key, ev, id)
		case RecordRelease:
			c.Record, err = decodeEvent[*Release](key, ev, id)
		case RecordStatus:
			c.Record, err = decodeEvent[*NodeStatus](key, ev, id)
		case RecordDemand:
			c.Record, err = decodeEvent[*Demand](key, ev, id)
		case RecordPodNetwork:
			c.Record, err = decodeEvent[*PodNetwork](key, ev, id)
		case RecordIntent:
			if !intents {
				continue
			}
			c.Record, err = decodeEvent[*Intent](key, ev, id)
		default:
			continue
		}
		if err != nil && quarantinable(c.Kind) {
			c.Record, c.Deleted, c.Quarantined, err = nil, true, err.Error(), nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// quarantinable reports whether a record of kind that does not decode is
// set aside rather than failing the batch.
func quarantinable(k RecordKind) bool {
	return k == RecordSubnet || k == RecordNode || k == RecordUsage || k == RecordStatus || k == RecordDemand || k == RecordPodNetwork
}

// decodeEvent decodes a put's value; nil for a delete.
func decodeEvent[P interface {
	*T
	record
}, T any](key string, ev *clientv3.Event, id string) (any, error) {
	if ev.Type == mvccpb.DELETE {
		return nil, nil
	}
	var t T
	if err := decode(key, ev.Kv.Value, ev.Kv.ModRevision, id, P(&t)); err != nil {
		return nil, err
	}
	return t, nil
}
