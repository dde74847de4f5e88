package ipamd

import (
	"errors"
	"net/netip"
	"slices"
	"sync"

	"github.com/allotnet/allot/agent/cniserver"
)

// errNoAddress is ipamd's answer to an ADD when its datastore has nothing
// free: "AssignPodIPv4Address: no available IP/Prefix addresses". The CNI
// plugin fails the ADD at once and kubelet retries the sandbox later.
var errNoAddress = errors.New("assign pod IPv4 address: no available IP/Prefix addresses")

// eni is one ENI in the datastore with the addresses ipamd added for it.
type eni struct {
	id          string
	deviceIndex int
	primary     bool
	ips         []netip.Addr   // secondary addresses (secondary-IP mode)
	prefixes    []netip.Prefix // /28 prefixes (prefix mode)
}

// datastore is ipamd's per-node record of ENIs, addresses and which
// attachment holds which address (pkg/ipamd/datastore, reduced to what a
// burst exercises: no cooldown, since no pod is deleted).
type datastore struct {
	mu       sync.Mutex
	enis     []*eni
	assigned map[netip.Addr]cniserver.Attachment
	byKey    map[cniserver.Attachment]netip.Addr
	owner    map[netip.Addr]string // address -> ENI ID
}

func newDatastore() *datastore {
	return &datastore{
		assigned: map[netip.Addr]cniserver.Attachment{},
		byKey:    map[cniserver.Attachment]netip.Addr{},
		owner:    map[netip.Addr]string{},
	}
}

// reset empties the datastore, as a restarted process finds it.
func (d *datastore) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.enis = nil
	d.assigned = map[netip.Addr]cniserver.Attachment{}
	d.byKey = map[cniserver.Attachment]netip.Addr{}
	d.owner = map[netip.Addr]string{}
}

// stats are the datastore's counts as isDatastorePoolTooLow reads them.
type stats struct {
	enis, total, assigned  int
	prefixes, freePrefixes int
}

func (s stats) available() int { return s.total - s.assigned }

func (d *datastore) stats() stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := stats{enis: len(d.enis), total: len(d.owner), assigned: len(d.assigned)}
	for _, e := range d.enis {
		for _, p := range e.prefixes {
			s.prefixes++
			if !d.prefixUsed(p) {
				s.freePrefixes++
			}
		}
	}
	return s
}

func (d *datastore) prefixUsed(p netip.Prefix) bool {
	for a := p.Addr(); p.Contains(a); a = a.Next() {
		if _, ok := d.assigned[a]; ok {
			return true
		}
	}
	return false
}

// addENI records an ENI (idempotent).
func (d *datastore) addENI(id string, deviceIndex int, primary bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.find(id) == nil {
		d.enis = append(d.enis, &eni{id: id, deviceIndex: deviceIndex, primary: primary})
	}
}

func (d *datastore) find(id string) *eni {
	for _, e := range d.enis {
		if e.id == id {
			return e
		}
	}
	return nil
}

// addIPs adds secondary addresses to an ENI, skipping ones it has.
func (d *datastore) addIPs(id string, ips []netip.Addr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.find(id)
	if e == nil {
		return
	}
	for _, a := range ips {
		if _, ok := d.owner[a]; ok {
			continue
		}
		e.ips = append(e.ips, a)
		d.owner[a] = id
	}
}

// addPrefixes adds /28 prefixes to an ENI; every address in them can be
// given to a pod.
func (d *datastore) addPrefixes(id string, prefixes []netip.Prefix) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.find(id)
	if e == nil {
		return
	}
	for _, p := range prefixes {
		p = p.Masked()
		if slices.Contains(e.prefixes, p) {
			continue
		}
		e.prefixes = append(e.prefixes, p)
		for a := p.Addr(); p.Contains(a); a = a.Next() {
			d.owner[a] = id
		}
	}
}

// cidrs is how many addresses (secondary-IP mode) or prefixes (prefix mode)
// the ENI holds.
func (e *eni) cidrs(prefixMode bool) int {
	if prefixMode {
		return len(e.prefixes)
	}
	return len(e.ips)
}

// allocatable lists the ENIs with fewer than max cidrs, in datastore order
// (GetAllocatableENIs).
func (d *datastore) allocatable(max int, prefixMode bool) []eni {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []eni
	for _, e := range d.enis {
		if e.cidrs(prefixMode) < max {
			out = append(out, *e)
		}
	}
	return out
}

// assign gives key a free address, or the one it already holds.
func (d *datastore) assign(key cniserver.Attachment) (netip.Addr, string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a, ok := d.byKey[key]; ok {
		return a, d.owner[a], nil
	}
	for _, e := range d.enis {
		for _, a := range d.addrsOf(e) {
			if _, used := d.assigned[a]; !used {
				d.assigned[a] = key
				d.byKey[key] = a
				return a, e.id, nil
			}
		}
	}
	return netip.Addr{}, "", errNoAddress
}

func (d *datastore) addrsOf(e *eni) []netip.Addr {
	out := slices.Clone(e.ips)
	for _, p := range e.prefixes {
		for a := p.Addr(); p.Contains(a); a = a.Next() {
			out = append(out, a)
		}
	}
	return out
}

// release frees key's address; unknown keys are fine.
func (d *datastore) release(key cniserver.Attachment) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a, ok := d.byKey[key]; ok {
		delete(d.byKey, key)
		delete(d.assigned, a)
	}
}
