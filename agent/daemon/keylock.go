package daemon

import (
	"sync"

	"github.com/allotnet/allot/agent/pool"
)

// keyLocks serialises the CNI calls of one attachment (an ADD retried while
// the first is still wiring the pod, a DEL racing its ADD) while calls of
// different attachments run in parallel. Entries live only while held.
type keyLocks struct {
	mu    sync.Mutex
	locks map[pool.Key]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

func (k *keyLocks) init() { k.locks = map[pool.Key]*keyLock{} }

// lock takes the attachment's lock and returns its release.
func (k *keyLocks) lock(key pool.Key) (unlock func()) {
	k.mu.Lock()
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
