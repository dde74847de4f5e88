package executor

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/allotnet/allot/broker/store"
)

// snapshot is one read of the engine's etcd state, indexed for a round.
type snapshot struct {
	nodes    []store.Node // sorted by instance ID
	node     map[string]store.Node
	demands  *shards[store.Demand]
	usage    *shards[store.Usage]
	enis     *shards[store.ENI]   // by ENI ID
	byNode   *shards[[]store.ENI] // by instance, sorted by device index
	subnets  map[string]store.Subnet
	podnets  []store.PodNetwork
	open     map[string][]store.Intent // open intents by instance ("" for none)
	openENI  map[string]bool           // ENI IDs that an open intent names
	releases map[string][]store.Release
	// unsettled counts, by instance, the ENIs upkeep has work for
	// (unsettledENI), so that it need not walk every ENI of the cluster.
	unsettled map[string]int
	// quarantined holds the nodes (by instance) and subnets (by id) with a
	// record that does not decode: they are left out of nodes and subnets,
	// so one bad record stops planning for its node or subnet only.
	quarantined map[string]store.Quarantined
	badSubnets  map[string]store.Quarantined
	// registered is every instance with a node record, sound or not.
	registered map[string]bool
}

func newSnapshot() *snapshot {
	return &snapshot{
		node:      map[string]store.Node{},
		demands:   &shards[store.Demand]{},
		usage:     &shards[store.Usage]{},
		enis:      &shards[store.ENI]{},
		byNode:    &shards[[]store.ENI]{},
		subnets:   map[string]store.Subnet{},
		open:      map[string][]store.Intent{},
		openENI:   map[string]bool{},
		releases:  map[string][]store.Release{},
		unsettled: map[string]int{},
	}
}

// load reads the state a round works from in full from etcd, but for the
// open intents: those are the store's mirror (refreshIntents).
func (e *Engine) load(ctx context.Context) (*snapshot, error) {
	s := newSnapshot()
	p, err := e.st.ReadPlanning(ctx)
	if err != nil {
		return nil, fmt.Errorf("read nodes and subnets: %w", err)
	}
	s.quarantined, s.badSubnets = p.QuarantinedNodes(), p.QuarantinedSubnets()
	s.registered = map[string]bool{}
	for _, q := range p.Quarantined {
		if q.Kind == "nodes" {
			s.registered[q.ID] = true
		}
	}
	for _, n := range p.Nodes {
		s.registered[n.InstanceID] = true
		if _, bad := s.quarantined[n.InstanceID]; !bad {
			s.nodes = append(s.nodes, n)
			s.node[n.InstanceID] = n
		}
	}
	s.demands, s.usage, s.podnets = shardsOf(p.Demands), shardsOf(p.Usage), p.PodNetworks
	enis, err := e.st.ListENIs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list enis: %w", err)
	}
	for _, sn := range p.Subnets {
		s.subnets[sn.ID] = sn
	}
	open := e.st.OpenIntents()
	rels, err := e.st.ListReleases(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list releases: %w", err)
	}
	s.fill(enis, open, rels)
	return s, nil
}

// fill indexes the ENIs (by ID, and by node in device order), the open
// intents and the releases (by node, oldest first).
// A node's ENIs of one device index (none attached yet) are in ID order.
func (s *snapshot) fill(enis []store.ENI, open []store.Intent, rels []store.Release) {
	s.enis = &shards[store.ENI]{}
	for _, x := range enis {
		s.enis.set(x.ID, x)
	}
	s.byNode = shardsOf(enisByNode(enis))
	s.unsettled = unsettledOf(enis)
	for _, in := range open {
		s.open[in.InstanceID] = append(s.open[in.InstanceID], in)
		if in.ENIID != "" {
			s.openENI[in.ENIID] = true
		}
	}
	sort.Slice(rels, func(i, j int) bool {
		if c := rels[i].CreatedAt.Compare(rels[j].CreatedAt); c != 0 {
			return c < 0
		}
		return rels[i].ID < rels[j].ID
	})
	for _, r := range rels {
		s.releases[r.InstanceID] = append(s.releases[r.InstanceID], r)
	}
}

// primary returns the node's primary ENI record, if recorded.
func (s *snapshot) primary(instance string) (store.ENI, bool) {
	l := s.byNode.at(instance)
	for k := range l {
		if l[k].Primary {
			return l[k], true
		}
	}
	return store.ENI{}, false
}

// enisByNode lists enis by instance, each list in eniOrder.
func enisByNode(enis []store.ENI) map[string][]store.ENI {
	byNode := map[string][]store.ENI{}
	for _, x := range enis {
		byNode[x.InstanceID] = append(byNode[x.InstanceID], x)
	}
	for _, l := range byNode {
		slices.SortFunc(l, eniOrder)
	}
	return byNode
}

// unsettledENI reports whether upkeep has work for ENI x: created but not
// attached (the attach is resumed), or detached but not deleted (it is
// deleted). A primary ENI never is.
func unsettledENI(x *store.ENI) bool {
	return !x.Primary && (x.Status == store.ENICreated || x.Status == store.ENIDetached)
}

// unsettledOf counts the unsettled ENIs of enis by instance.
func unsettledOf(enis []store.ENI) map[string]int {
	m := map[string]int{}
	for k := range enis {
		if unsettledENI(&enis[k]) {
			m[enis[k].InstanceID]++
		}
	}
	return m
}

// countIn adds d to m[id], and forgets id at 0.
func countIn(m map[string]int, id string, d int) {
	if m[id] += d; m[id] <= 0 {
		delete(m, id)
	}
}
