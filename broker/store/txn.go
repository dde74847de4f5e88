package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxAttempts bounds how often one call re-reads and re-decides after a
// compared revision changed. Each failed attempt means another writer won,
// so progress is made; the bound only stops a livelock.
const maxAttempts = 64

// view is what one attempt of an update read: a set of keys and prefixes,
// all at one etcd revision, plus the writes the attempt decided on. Reading
// a key or prefix the view doesn't hold records it as wanted and returns
// errWant; the loop then re-reads with it included.
//
// Reads see the attempt's own writes, so several decisions made in one
// attempt (a batch, see Apply) each see what the ones before them wrote.
// A key written twice is written once, with its last value: etcd refuses
// a key twice in one transaction.
type view struct {
	s      *Store
	rev    int64
	keys   map[string]*mvccpb.KeyValue // nil value: read, absent
	ranges map[string][]*mvccpb.KeyValue
	wantK  []string
	wantR  []string

	writes  map[string]write
	order   []string // written keys, in the order first written
	journal []undo   // every write, to take back the latest (rollback)
}

// write is a queued put (kv the value it leaves) or delete (kv nil).
type write struct {
	op clientv3.Op
	kv *mvccpb.KeyValue
}

// undo is what a write replaced: the key's earlier write, if it had one.
type undo struct {
	key  string
	prev write
	had  bool
}

var errWant = errors.New("store: view needs more keys")

// raw returns the stored pair at key, or nil if absent.
func (v *view) raw(key string) (*mvccpb.KeyValue, error) {
	if w, ok := v.writes[key]; ok {
		return w.kv, nil
	}
	kv, ok := v.keys[key]
	if !ok {
		v.wantK = append(v.wantK, key)
		return nil, errWant
	}
	return kv, nil
}

// rawRange returns every pair under prefix.
func (v *view) rawRange(prefix string) ([]*mvccpb.KeyValue, error) {
	kvs, ok := v.ranges[prefix]
	if !ok {
		v.wantR = append(v.wantR, prefix)
		return nil, errWant
	}
	written := false
	for k := range v.writes {
		if strings.HasPrefix(k, prefix) {
			written = true
			break
		}
	}
	if !written {
		return kvs, nil
	}
	merged := make([]*mvccpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		if _, ok := v.writes[string(kv.Key)]; !ok {
			merged = append(merged, kv)
		}
	}
	for k, w := range v.writes {
		if strings.HasPrefix(k, prefix) && w.kv != nil {
			merged = append(merged, w.kv)
		}
	}
	slices.SortFunc(merged, func(a, b *mvccpb.KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	return merged, nil
}

// put queues writing r at key. Until committed, the value reads with mod
// revision 0 (so a record's Rev is 0: written by this attempt).
func (v *view) put(key string, r record, opts ...clientv3.OpOption) error {
	val, err := encode(key, r)
	if err != nil {
		return err
	}
	v.putValue(key, val, opts...)
	return nil
}

// putValue queues writing the encoded val at key.
func (v *view) putValue(key, val string, opts ...clientv3.OpOption) {
	v.write(key, write{op: clientv3.OpPut(key, val, opts...), kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(val)}})
}

// putChanged queues writing r at key unless key already holds exactly the
// bytes r encodes to, and says whether it queued the write: a write that
// changes nothing still costs etcd a raft entry, an fsync and an event for
// every watcher.
func (v *view) putChanged(key string, r record) (bool, error) {
	val, err := encode(key, r)
	if err != nil {
		return false, err
	}
	if kv := v.keys[key]; kv != nil && string(kv.Value) == val {
		return false, nil
	}
	v.putValue(key, val)
	return true, nil
}

// del queues deleting key.
func (v *view) del(key string) { v.write(key, write{op: clientv3.OpDelete(key)}) }

func (v *view) write(key string, w write) {
	if v.writes == nil {
		v.writes = map[string]write{}
	}
	prev, had := v.writes[key]
	v.journal = append(v.journal, undo{key: key, prev: prev, had: had})
	if !had {
		v.order = append(v.order, key)
	}
	v.writes[key] = w
}

// savepoint marks the writes queued so far; rollback(savepoint) takes
// back every write queued after it.
func (v *view) savepoint() int { return len(v.journal) }

func (v *view) rollback(mark int) {
	for len(v.journal) > mark {
		u := v.journal[len(v.journal)-1]
		v.journal = v.journal[:len(v.journal)-1]
		if u.had {
			v.writes[u.key] = u.prev
			continue
		}
		// The key's first write: the latest key in order, since every
		// write after it was taken back already.
		delete(v.writes, u.key)
		v.order = v.order[:len(v.order)-1]
	}
}

// ops returns the queued writes, one per key.
func (v *view) ops() []clientv3.Op {
	ops := make([]clientv3.Op, 0, len(v.order))
	for _, k := range v.order {
		ops = append(ops, v.writes[k].op)
	}
	return ops
}

// get decodes the record at s.key(kind,id) into dst; false if absent.
func get[P interface {
	*T
	record
}, T any](v *view, kind, id string, dst P) (bool, error) {
	key := v.s.key(kind, id)
	kv, err := v.raw(key)
	if err != nil || kv == nil {
		return false, err
	}
	return true, decode(key, kv.Value, kv.ModRevision, id, dst)
}

// list decodes every record of a kind, in key order.
func list[P interface {
	*T
	record
}, T any](v *view, kind string) ([]T, error) {
	dir := v.s.dir(kind)
	kvs, err := v.rawRange(dir)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(kvs))
	for _, kv := range kvs {
		var t T
		key := string(kv.Key)
		if err := decode(key, kv.Value, kv.ModRevision, strings.TrimPrefix(key, dir), P(&t)); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// readOps returns Gets for every key and prefix of the view, in a fixed
// order that fill() relies on.
func readOps(keys, ranges []string) []clientv3.Op {
	ops := make([]clientv3.Op, 0, len(keys)+len(ranges))
	for _, k := range keys {
		ops = append(ops, clientv3.OpGet(k))
	}
	for _, p := range ranges {
		ops = append(ops, clientv3.OpGet(p, clientv3.WithPrefix()))
	}
	return ops
}

// fill builds a fresh view from the responses of readOps(keys, ranges).
func (s *Store) fill(rev int64, keys, ranges []string, rs []*pb.ResponseOp) *view {
	v := &view{s: s, rev: rev, keys: map[string]*mvccpb.KeyValue{}, ranges: map[string][]*mvccpb.KeyValue{}}
	for i, k := range keys {
		var kv *mvccpb.KeyValue
		if r := rs[i].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
			kv = r.Kvs[0]
		}
		v.keys[k] = kv
	}
	for i, p := range ranges {
		var kvs []*mvccpb.KeyValue
		if r := rs[len(keys)+i].GetResponseRange(); r != nil {
			kvs = r.Kvs
		}
		v.ranges[p] = kvs
	}
	return v
}

// read takes one consistent snapshot of keys and prefixes.
func (s *Store) read(ctx context.Context, keys, ranges []string) (*view, error) {
	resp, err := s.cli.Txn(ctx).Then(readOps(keys, ranges)...).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcd read: %w", err)
	}
	return s.fill(resp.Header.Revision, keys, ranges, resp.Responses), nil
}

// readView reads keys/prefixes and runs fn on them, re-reading whatever fn
// asks for, without writing. It is the read-only twin of update.
func (s *Store) readView(ctx context.Context, keys, ranges []string, fn func(*view) error) error {
	for i := 0; ; i++ {
		v, err := s.read(ctx, keys, ranges)
		if err != nil {
			return err
		}
		err = fn(v)
		if !errors.Is(err, errWant) || i > 8 {
			return err
		}
		keys, ranges = appendNew(keys, v.wantK), appendNew(ranges, v.wantR)
	}
}

// update is the one write pattern of the store: read a snapshot, let fn
// decide (queue puts/deletes on the view or return an error), then commit
// with Txn().If(every read key and prefix is unchanged).Then(fn's writes)
// .Else(read them again). When a compare fails fn runs again on the fresh
// values from the Else branch; a retry therefore re-decides from current
// state and never replays a stale write. fn queuing nothing means nothing
// needs writing (an idempotent no-op) and costs no write. It returns the
// revision the writes committed at.
func (s *Store) update(ctx context.Context, method string, keys, ranges []string, fn func(*view) error) (int64, error) {
	return s.updateN(ctx, method, maxAttempts, keys, ranges, fn)
}

// updateN is update with at most attempts write attempts.
func (s *Store) updateN(ctx context.Context, method string, attempts int, keys, ranges []string, fn func(*view) error) (int64, error) {
	v, err := s.read(ctx, keys, ranges)
	if err != nil {
		return 0, err
	}
	wants := 0
	for attempt := 0; attempt < attempts; attempt++ {
		err := fn(v)
		if errors.Is(err, errWant) && wants < 8 {
			wants++
			keys, ranges = appendNew(keys, v.wantK), appendNew(ranges, v.wantR)
			if v, err = s.read(ctx, keys, ranges); err != nil {
				return 0, err
			}
			attempt--
			continue
		}
		if err != nil {
			return 0, err
		}
		ops := v.ops()
		if len(ops) == 0 {
			return v.rev, nil
		}
		cmps := make([]clientv3.Cmp, 0, len(keys)+len(ranges))
		for _, k := range keys {
			var rev int64
			if kv := v.keys[k]; kv != nil {
				rev = kv.ModRevision
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", rev))
		}
		for _, p := range ranges {
			// No key under p was created or changed since the snapshot.
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(p), "<", v.rev+1).WithPrefix())
		}
		elseOps := readOps(keys, ranges)
		fence, fenced := FenceFrom(ctx)
		if fenced {
			// The fence's Get goes last, after the ones fill() reads.
			cmps = append(cmps, fence.cmp())
			elseOps = append(elseOps, clientv3.OpGet(fence.Key))
		}
		s.countWrite(method)
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Else(elseOps...).Commit()
		if err != nil {
			return 0, fmt.Errorf("etcd txn (%s): %w", method, err)
		}
		if resp.Succeeded {
			s.noteWrite(ctx, resp.Header.Revision)
			return resp.Header.Revision, nil
		}
		if fenced && !fence.held(resp.Responses[len(resp.Responses)-1]) {
			return 0, fence.notLeader(method)
		}
		v = s.fill(resp.Header.Revision, keys, ranges, resp.Responses)
		if err := backoff(ctx, attempt); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("%s: gave up after %d attempts: %w", method, attempts, rpcerr.ErrConflict)
}

// backoff sleeps a little, with jitter, so racing writers spread out.
func backoff(ctx context.Context, attempt int) error {
	if attempt == 0 {
		return nil
	}
	max := time.Duration(min(attempt, 20)) * time.Millisecond
	t := time.NewTimer(rand.N(max) + 1)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func appendNew(have, add []string) []string {
	for _, a := range add {
		found := false
		for _, h := range have {
			if h == a {
				found = true
				break
			}
		}
		if !found {
			have = append(have, a)
		}
	}
	return have
}
