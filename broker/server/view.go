package server

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/allotnet/allot/broker/podnet"
	"github.com/allotnet/allot/broker/store"
)

// view is the whole state the budget figures and the admin summaries are
// computed from: read from etcd by loadView (revision first, so every
// record is at least as new as it), or built by the hub from its mirror
// (every record exactly as of rev).
type view struct {
	rev       int64
	subnets   []store.Subnet
	nodes     []store.Node
	enis      []store.ENI
	usage     map[string]store.Usage
	releases  []store.Release
	statuses  map[string]store.NodeStatus
	enisBy    map[string][]store.ENI
	releaseBy map[string][]store.Release // proposed and acknowledged
	nodeBy    map[string]store.Node
	// demands and quarantined are filled by loadView only: the records
	// that do not decode are set aside there, not fatal, so one bad record
	// does not blind operators and planners to the rest.
	demands     map[string]store.Demand
	quarantined []store.Quarantined
	podnets     []store.PodNetwork
}

// podNodes is the nodes each counted in the subnet its pods go to, and
// the primary ENIs closed to pods (podnet.AtHome): the budget figures
// count a node's free pod slots there, and no free slot of a closed ENI.
func (v *view) podNodes() ([]store.Node, map[string]bool) {
	return podnet.AtHome(v.podnets, v.nodes, v.subnets)
}

// loadView reads everything a view holds.
func loadView(ctx context.Context, st ViewReads) (*view, error) {
	rev, err := st.Revision(ctx)
	if err != nil {
		return nil, err
	}
	v := &view{rev: rev}
	p, err := st.ReadPlanning(ctx)
	if err != nil {
		return nil, fmt.Errorf("read nodes and subnets: %w", err)
	}
	v.subnets, v.nodes, v.usage, v.demands, v.quarantined = p.Subnets, p.Nodes, p.Usage, p.Demands, p.Quarantined
	v.podnets = p.PodNetworks
	if v.enis, err = st.ListENIs(ctx); err != nil {
		return nil, fmt.Errorf("list enis: %w", err)
	}
	if v.releases, err = st.ListReleases(ctx, ""); err != nil {
		return nil, fmt.Errorf("list releases: %w", err)
	}
	if v.statuses, err = st.ListNodeStatus(ctx); err != nil {
		return nil, fmt.Errorf("list node status: %w", err)
	}
	v.index()
	return v, nil
}

func (v *view) index() {
	v.enisBy = map[string][]store.ENI{}
	for _, e := range v.enis {
		v.enisBy[e.InstanceID] = append(v.enisBy[e.InstanceID], e)
	}
	v.releaseBy = map[string][]store.Release{}
	for _, r := range v.releases {
		if r.State == store.ReleaseProposed || r.State == store.ReleaseAcked {
			v.releaseBy[r.InstanceID] = append(v.releaseBy[r.InstanceID], r)
		}
	}
	v.nodeBy = make(map[string]store.Node, len(v.nodes))
	for _, n := range v.nodes {
		v.nodeBy[n.InstanceID] = n
	}
}

// subnetCIDRs maps subnet IDs to CIDRs, for the ENI messages.
func subnetCIDRs(subnets []store.Subnet) map[string]string {
	m := make(map[string]string, len(subnets))
	for _, s := range subnets {
		m[s.ID] = s.CIDR
	}
	return m
}

// addrIndex answers "which of these ENIs holds this pod address": secondary
// addresses by lookup, prefix addresses by containment.
type addrIndex struct {
	addrs    map[string]*store.ENI
	prefixes []indexedPrefix
}

type indexedPrefix struct {
	p   netip.Prefix
	eni *store.ENI
}

func newAddrIndex(enis []store.ENI) *addrIndex {
	ix := &addrIndex{addrs: map[string]*store.ENI{}}
	for i := range enis {
		e := &enis[i]
		for _, a := range e.Addresses {
			ix.addrs[a] = e
		}
		for _, p := range e.Prefixes {
			if pp, err := netip.ParsePrefix(p); err == nil {
				ix.prefixes = append(ix.prefixes, indexedPrefix{pp.Masked(), e})
			}
		}
	}
	return ix
}

// owner returns the ENI whose secondary addresses or prefixes hold addr.
func (ix *addrIndex) owner(addr string) (*store.ENI, bool) {
	if e, ok := ix.addrs[addr]; ok {
		return e, true
	}
	if len(ix.prefixes) == 0 {
		return nil, false
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return nil, false
	}
	for _, p := range ix.prefixes {
		if p.p.Contains(a) {
			return p.eni, true
		}
	}
	return nil, false
}
