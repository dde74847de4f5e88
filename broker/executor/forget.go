package executor

// forgetDeparted drops what the round remembers per node for nodes that no
// longer have a node record (registered, sound or set aside): their planner
// views and surpluses, when each was first seen wanting addresses or with
// a surplus, its last release proposal, its back-off and why its demand
// was unmet. Nodes come and go all day in an autoscaled cluster, and
// without this each departed node's entries would stay for as long as
// this broker leads, its unmet reason listed as if the node still waited.
//
// It walks a map only when the map holds more nodes than are registered,
// so a steady cluster pays a length check per map and round. It runs
// before the round starts a release proposals' writer, which shares
// proposed with it.
func (e *Engine) forgetDeparted(rs *runState, snap *snapshot) {
	n := len(snap.registered)
	gone := func(id string) bool { return !snap.registered[id] }
	if len(rs.nodes) > n {
		dropGone(rs.nodes, gone)
	}
	if len(rs.surplusOf) > n {
		dropGone(rs.surplusOf, gone)
	}
	if len(rs.wanting) > n {
		dropGone(rs.wanting, gone)
	}
	if len(rs.surplus) > n {
		dropGone(rs.surplus, gone)
	}
	if !e.proposing.Load() && len(rs.proposed) > n {
		dropGone(rs.proposed, gone)
	}
	rs.mu.Lock()
	if len(rs.backoff) > n {
		dropGone(rs.backoff, gone)
	}
	rs.mu.Unlock()
	e.unmet.forget(n, gone)
}

// forget drops the reasons of nodes gone says are gone, when more nodes
// have one than the n registered. What was published and is pending
// belongs to the publisher, which drops departed nodes itself (publish).
func (u *unmetBook) forget(n int, gone func(string) bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.unmet) > n {
		dropGone(u.unmet, gone)
	}
	if len(u.reported) > n {
		dropGone(u.reported, gone)
	}
}

// dropGone deletes the keys of m that gone reports.
func dropGone[V any](m map[string]V, gone func(string) bool) {
	for id := range m {
		if gone(id) {
			delete(m, id)
		}
	}
}
