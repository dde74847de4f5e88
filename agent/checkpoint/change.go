package checkpoint

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// change is what a Save appends when it does not rewrite the file: the
// records of the new state that differ from the state the file held
// (journal.go), by key, and the keys of those it no longer has. Replayed
// onto the state before it, it gives the new state exactly: a record is
// written again whenever it is not identical to the one held, so nothing
// that changed is left out, and writing an unchanged one again is harmless.
type change struct {
	InstanceID      string       `json:"instanceID"`
	UsageSeq        uint64       `json:"usageSeq"`
	ENIs            []ENI        `json:"enis,omitempty"`
	Addresses       []Address    `json:"addresses,omitempty"`
	Allocations     []Allocation `json:"allocations,omitempty"`
	GoneENIs        []string     `json:"goneENIs,omitempty"`
	GoneAddresses   []netip.Addr `json:"goneAddresses,omitempty"`
	GoneAllocations []attachKey  `json:"goneAllocations,omitempty"`
}

// attachKey is an allocation's key: the CNI attachment.
type attachKey struct {
	Network     string `json:"network"`
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
}

func (al Allocation) key() attachKey {
	return attachKey{Network: al.Network, ContainerID: al.ContainerID, IfName: al.IfName}
}

func (k attachKey) compare(o attachKey) int {
	return cmp.Or(cmp.Compare(k.Network, o.Network), cmp.Compare(k.ContainerID, o.ContainerID), cmp.Compare(k.IfName, o.IfName))
}

func eniID(e ENI) string              { return e.ID }
func addrOf(a Address) netip.Addr     { return a.Addr }
func allocKey(a Allocation) attachKey { return a.key() }

func compareAddr(a, b netip.Addr) int { return a.Compare(b) }

// sortByKey puts s's lists in key order (ENIs by ID, addresses by address,
// allocations by attachment), the order Load returns them in, and makes
// an empty list nil, as the pool's are.
func sortByKey(s *State) {
	s.ENIs, s.Addresses, s.Allocations = nilIfEmpty(s.ENIs), nilIfEmpty(s.Addresses), nilIfEmpty(s.Allocations)
	slices.SortFunc(s.ENIs, func(a, b ENI) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(s.Addresses, func(a, b Address) int { return a.Addr.Compare(b.Addr) })
	slices.SortFunc(s.Allocations, func(a, b Allocation) int { return a.key().compare(b.key()) })
}

func nilIfEmpty[T any](l []T) []T {
	if len(l) == 0 {
		return nil
	}
	return l
}

// copyInto copies s into dst's lists, reusing their arrays, and puts them
// in key order; s is not modified.
func copyInto(dst *State, s State) {
	dst.InstanceID, dst.UsageSeq = s.InstanceID, s.UsageSeq
	dst.ENIs = append(dst.ENIs[:0], s.ENIs...)
	dst.Addresses = append(dst.Addresses[:0], s.Addresses...)
	dst.Allocations = append(dst.Allocations[:0], s.Allocations...)
	sortByKey(dst)
}

// diff returns the change from old to new, both in key order. c's lists
// are reused.
func diff(c *change, old, new State) {
	c.InstanceID, c.UsageSeq = new.InstanceID, new.UsageSeq
	c.ENIs, c.GoneENIs = diffSorted(c.ENIs[:0], c.GoneENIs[:0], old.ENIs, new.ENIs, eniID, cmp.Compare[string])
	c.Addresses, c.GoneAddresses = diffSorted(c.Addresses[:0], c.GoneAddresses[:0], old.Addresses, new.Addresses,
		addrOf, compareAddr)
	c.Allocations, c.GoneAllocations = diffSorted(c.Allocations[:0], c.GoneAllocations[:0], old.Allocations,
		new.Allocations, allocKey, attachKey.compare)
}

// diffSorted walks two lists in key order and appends to set every record
// of new not identical to old's of the same key, and to gone every key of
// old that new lacks.
func diffSorted[T comparable, K any](set []T, gone []K, old, new []T, key func(T) K, compare func(K, K) int) ([]T, []K) {
	i, j := 0, 0
	for i < len(old) || j < len(new) {
		var c int
		switch {
		case i == len(old):
			c = 1
		case j == len(new):
			c = -1
		default:
			c = compare(key(old[i]), key(new[j]))
		}
		switch {
		case c < 0:
			gone = append(gone, key(old[i]))
			i++
		case c > 0:
			set = append(set, new[j])
			j++
		default:
			if old[i] != new[j] {
				set = append(set, new[j])
			}
			i++
			j++
		}
	}
	return set, gone
}

// apply replays c onto s and puts s in key order. A change that removes a
// record s does not hold contradicts the journal before it: an error.
func (s *State) apply(c change) error {
	s.InstanceID, s.UsageSeq = c.InstanceID, c.UsageSeq
	var err error
	if s.ENIs, err = applyTo(s.ENIs, c.ENIs, c.GoneENIs, eniID); err != nil {
		return fmt.Errorf("eni: %w", err)
	}
	if s.Addresses, err = applyTo(s.Addresses, c.Addresses, c.GoneAddresses, addrOf); err != nil {
		return fmt.Errorf("address: %w", err)
	}
	if s.Allocations, err = applyTo(s.Allocations, c.Allocations, c.GoneAllocations, allocKey); err != nil {
		return fmt.Errorf("allocation: %w", err)
	}
	sortByKey(s)
	return nil
}

// applyTo removes the records of gone from list and sets those of set,
// replacing a record of the same key or adding one.
func applyTo[T any, K comparable](list, set []T, gone []K, key func(T) K) ([]T, error) {
	at := make(map[K]int, len(list))
	for i, r := range list {
		at[key(r)] = i
	}
	drop := make(map[K]bool, len(gone))
	for _, k := range gone {
		if _, ok := at[k]; !ok || drop[k] {
			return nil, fmt.Errorf("the change removes %v, which the state before it does not hold", k)
		}
		drop[k] = true
	}
	for _, r := range set {
		k := key(r)
		if drop[k] {
			return nil, fmt.Errorf("the change both sets and removes %v", k)
		}
		if i, ok := at[k]; ok {
			list[i] = r
			continue
		}
		at[k] = len(list)
		list = append(list, r)
	}
	if len(drop) > 0 {
		list = slices.DeleteFunc(list, func(r T) bool { return drop[key(r)] })
	}
	return list, nil
}
