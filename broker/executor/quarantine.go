package executor

import (
	"fmt"
	"sort"

	"github.com/allotnet/allot/broker/store"
)

// quarantine marks every node set aside for a record that does not decode
// as unmet, so its status says why and the log says it once, not on every
// round. Its ENIs, demand and releases are left alone until the record is
// fixed or the node registers again: acting on part of a node's state is a
// guess.
func (e *Engine) quarantine(snap *snapshot) {
	for _, id := range sortedIDs(snap.quarantined) {
		q := snap.quarantined[id]
		e.unmet.set(id, &reasoned{store.UnmetQuarantined,
			fmt.Errorf("record %s does not decode; the node is left out of planning until it is fixed or the node registers again: %s", q.Key, q.Err)})
	}
}

// subnetQuarantined is why a node whose subnet record does not decode gets
// nothing new, or nil.
func (snap *snapshot) subnetQuarantined(subnetID string) error {
	q, bad := snap.badSubnets[subnetID]
	if !bad {
		return nil
	}
	return &reasoned{store.UnmetQuarantined,
		fmt.Errorf("subnet record %s does not decode; nothing is planned in the subnet until it is fixed: %s", q.Key, q.Err)}
}

// ensureView is the subnets the instance cache may take as known: the
// sound ones, and the quarantined ones as placeholders, so it does not
// describe and try to overwrite a bad record on every round (the store
// refuses that write anyway).
func (snap *snapshot) ensureView() map[string]store.Subnet {
	out := make(map[string]store.Subnet, len(snap.subnets)+len(snap.badSubnets))
	for id, sn := range snap.subnets {
		out[id] = sn
	}
	for id := range snap.badSubnets {
		out[id] = store.Subnet{ID: id}
	}
	return out
}

// statusIDs is every node whose status the round publishes: the sound ones
// and the quarantined ones that are registered.
func (snap *snapshot) statusIDs() []string {
	ids := make([]string, 0, len(snap.nodes)+len(snap.quarantined))
	for _, n := range snap.nodes {
		ids = append(ids, n.InstanceID)
	}
	for _, id := range sortedIDs(snap.quarantined) {
		if snap.registered[id] {
			ids = append(ids, id)
		}
	}
	return ids
}

func sortedIDs[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
