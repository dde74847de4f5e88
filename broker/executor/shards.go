package executor

import (
	"hash/maphash"
	"iter"
	"maps"
)

// shardCount is how many parts a shards map is split into.
const shardCount = 256

var shardSeed = maphash.MakeSeed()

// shards is a map by ID split into shardCount maps by the ID's hash, so
// that the view can lend it to a snapshot and copy, at its next change,
// only the part that changes (cowShards). The view changes a few dozen
// records between two rounds; copying whole maps of thousands of records
// for each round was a third of everything the broker allocated at 5,000
// nodes, and most of its collector's work.
//
// A snapshot reads it (get, at, len, all) and never changes it.
type shards[T any] struct {
	m [shardCount]map[string]T
}

func shardOf(id string) int { return int(maphash.String(shardSeed, id) % shardCount) }

// shardsOf returns the records of m as shards.
func shardsOf[T any](m map[string]T) *shards[T] {
	s := &shards[T]{}
	for id, x := range m {
		s.set(id, x)
	}
	return s
}

// get returns id's record and whether there is one.
func (s *shards[T]) get(id string) (T, bool) {
	x, ok := s.m[shardOf(id)][id]
	return x, ok
}

// at returns id's record, or T's zero value.
func (s *shards[T]) at(id string) T {
	return s.m[shardOf(id)][id]
}

func (s *shards[T]) len() int {
	n := 0
	for _, m := range s.m {
		n += len(m)
	}
	return n
}

// all yields every record, in no order.
func (s *shards[T]) all() iter.Seq2[string, T] {
	return func(yield func(string, T) bool) {
		for _, m := range s.m {
			for id, x := range m {
				if !yield(id, x) {
					return
				}
			}
		}
	}
}

// set changes a shards map no snapshot holds (built, not lent).
func (s *shards[T]) set(id string, x T) { s.setIn(shardOf(id), id, x) }

// setIn sets id's record in part k, id's part.
func (s *shards[T]) setIn(k int, id string, x T) {
	if s.m[k] == nil {
		s.m[k] = map[string]T{}
	}
	s.m[k][id] = x
}

// cowShards is the view's shards map, lent to snapshots: lend gives a
// snapshot the parts as they are, and a part lent is copied before it is
// next changed, so a snapshot never sees a later change.
type cowShards[T any] struct {
	cur  shards[T]
	lent [shardCount]bool
}

func newCOWShards[T any](m map[string]T) *cowShards[T] {
	return &cowShards[T]{cur: *shardsOf(m)}
}

// lend returns the map as it is now for a snapshot to hold.
func (c *cowShards[T]) lend() *shards[T] {
	s := c.cur
	for k := range c.lent {
		c.lent[k] = true
	}
	return &s
}

func (c *cowShards[T]) get(id string) (T, bool) { return c.cur.get(id) }

// own makes the part of id the view's own, copying it if lent.
func (c *cowShards[T]) own(id string) int {
	k := shardOf(id)
	if c.lent[k] {
		c.cur.m[k], c.lent[k] = maps.Clone(c.cur.m[k]), false
	}
	return k
}

func (c *cowShards[T]) set(id string, x T) { c.cur.setIn(c.own(id), id, x) }

func (c *cowShards[T]) del(id string) {
	if _, ok := c.cur.get(id); !ok {
		return
	}
	delete(c.cur.m[c.own(id)], id)
}
