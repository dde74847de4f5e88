package executor

import (
	"sync"
	"time"
)

// ledger is the addresses this run delivered to each node (or found that
// an earlier leader delivered), by when: what a demand stated before a
// delivery did not know of yet.
type ledger struct {
	mu     sync.Mutex
	byNode map[string][]delivery
}

// delivery is addresses added to a node at a time, keyed by the ENI or
// intent that added them so a failed attach can take them back.
type delivery struct {
	at  time.Time
	n   int
	key string
}

func newLedger() *ledger { return &ledger{byNode: map[string][]delivery{}} }

// add records n addresses delivered to node at time at under key.
func (l *ledger) add(node, key string, n int, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byNode[node] = append(l.byNode[node], delivery{at: at, n: n, key: key})
}

// remove takes back the delivery recorded under key and says how many
// addresses it held.
func (l *ledger) remove(node, key string) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ds := l.byNode[node]
	for i, d := range ds {
		if d.key == key {
			l.byNode[node] = append(ds[:i:i], ds[i+1:]...)
			return d.n, true
		}
	}
	return 0, false
}

// since returns the addresses delivered to node after t, when its demand
// was stated: the agent did not know of them when it computed that
// demand, so they count against it until it states a new one. Older
// deliveries are forgotten.
func (l *ledger) since(node string, t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	ds := l.byNode[node]
	kept := ds[:0]
	n := 0
	for _, d := range ds {
		if d.at.After(t) {
			kept = append(kept, d)
			n += d.n
		}
	}
	if len(kept) == 0 {
		delete(l.byNode, node)
	} else {
		l.byNode[node] = kept
	}
	return n
}
