package store

import (
	"runtime"
	"strings"
	"sync"
	"unsafe"
	"weak"
)

// intern returns s as one shared copy of its bytes: every record decoded
// with the same instance, ENI or subnet ID then holds the same string.
//
// The engine looks nodes up by instance ID in a dozen maps in every
// round, thousands of nodes at a time. A map compares the key it is asked
// for with the one it holds, and two strings that share their bytes
// compare by pointer; two copies compare byte by byte, from memory the
// lookup would not otherwise touch. At 5,000 nodes that comparison was a
// sixth of the rounds' CPU.
//
// The table holds each shared copy weakly, and forgets it once no record
// holds it (package unique would not do: it forgets a string as soon as
// nobody holds its handle, so the copies made before and after a garbage
// collection would differ).
func intern(s string) string {
	if s == "" {
		return s
	}
	return ids.intern(s)
}

var ids = internTable{m: map[string]weak.Pointer[byte]{}}

type internTable struct {
	mu sync.Mutex
	m  map[string]weak.Pointer[byte]
}

func (t *internTable) intern(s string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.m[s].Value(); p != nil {
		return unsafe.String(p, len(s))
	}
	// The table's key is s, the caller's copy; the shared copy is made
	// apart, so that the table's key does not keep it alive.
	c := strings.Clone(s)
	p := unsafe.StringData(c)
	w := weak.Make(p)
	t.m[s] = w
	runtime.AddCleanup(p, t.forget, internEntry{s, w})
	return c
}

type internEntry struct {
	id string
	w  weak.Pointer[byte]
}

// forget drops e once its shared copy is gone, unless a newer copy took
// its place.
func (t *internTable) forget(e internEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[e.id] == e.w {
		delete(t.m, e.id)
	}
}

// canon returns the constant of known that equals s, or s: a decoded
// status then shares the constant's bytes, and the engine's walks that
// compare thousands of statuses with the constants in every round read
// no memory of the record's own for it.
func canon(s string, known ...string) string {
	for _, k := range known {
		if s == k {
			return k
		}
	}
	return s
}

// internIDs is implemented by the records whose IDs name other records;
// decode calls it on every record it returns.
type internIDs interface{ internIDs() }

func (r *Subnet) internIDs() { r.ID = intern(r.ID) }

func (r *Node) internIDs() {
	r.InstanceID, r.SubnetID, r.PrimaryENIID = intern(r.InstanceID), intern(r.SubnetID), intern(r.PrimaryENIID)
	// The key of the broker's table of instance types' limits.
	r.InstanceType = intern(r.InstanceType)
	r.Mode = canon(r.Mode, ModePrefix, ModeSecondaryIP)
}

func (r *Demand) internIDs() { r.InstanceID = intern(r.InstanceID) }

func (r *Usage) internIDs() { r.InstanceID = intern(r.InstanceID) }

func (r *Liveness) internIDs() { r.InstanceID = intern(r.InstanceID) }

func (r *ENI) internIDs() {
	r.ID, r.InstanceID, r.SubnetID = intern(r.ID), intern(r.InstanceID), intern(r.SubnetID)
	r.Status = canon(r.Status, ENIAttached, ENICreated, ENIDetached)
}

func (r *Intent) internIDs() {
	r.InstanceID, r.ENIID, r.SubnetID = intern(r.InstanceID), intern(r.ENIID), intern(r.SubnetID)
	r.Kind = canon(r.Kind, IntentCreate, IntentAttach, IntentModify, IntentAssign, IntentUnassign, IntentDetach, IntentDelete)
	r.State = canon(r.State, IntentOpen, IntentDone, IntentFailed)
}

func (r *Release) internIDs() {
	r.ID, r.InstanceID, r.ENIID = intern(r.ID), intern(r.InstanceID), intern(r.ENIID)
	r.State = canon(r.State, ReleaseProposed, ReleaseAcked, ReleaseDone)
}
