package store

import (
	"context"
	"slices"
	"strings"
)

// Quarantined is a stored record that does not decode (bad JSON, another
// schema version, an id that does not match its key). Planning sets the
// node or subnet it belongs to aside instead of stopping for the whole
// cluster: one bad record must not starve every other node.
type Quarantined struct {
	// Kind is the key kind: "nodes", "demand", "usage", "subnets" or
	// "podnetworks".
	Kind string `json:"kind"`
	// ID is the key's last element: an instance id, or a subnet id.
	ID  string `json:"id"`
	Key string `json:"key"`
	// Err says why it did not decode.
	Err string `json:"error"`
}

// Planning is one consistent read of what a planning round needs, with
// every record that does not decode set aside in Quarantined.
type Planning struct {
	Nodes       []Node // sorted by instance id
	Demands     map[string]Demand
	Usage       map[string]Usage
	Subnets     []Subnet // sorted by id
	PodNetworks []PodNetwork
	Quarantined []Quarantined
}

// QuarantinedNodes returns the instance ids with a record that does not
// decode (registration, demand or usage).
func (p Planning) QuarantinedNodes() map[string]Quarantined {
	out := map[string]Quarantined{}
	for _, q := range p.Quarantined {
		if q.Kind != kindSubnets && q.Kind != kindPodNetworks {
			if _, ok := out[q.ID]; !ok {
				out[q.ID] = q
			}
		}
	}
	return out
}

// QuarantinedSubnets returns the subnet ids whose record does not decode.
func (p Planning) QuarantinedSubnets() map[string]Quarantined {
	out := map[string]Quarantined{}
	for _, q := range p.Quarantined {
		if q.Kind == kindSubnets {
			out[q.ID] = q
		}
	}
	return out
}

// ReadPlanning reads nodes, demands, usage reports, subnets and pod networks at one
// revision. Unlike the List methods it does not fail on a record that
// does not decode: it returns the rest and names the bad ones.
func (s *Store) ReadPlanning(ctx context.Context) (Planning, error) {
	var p Planning
	dirs := []string{s.dir(kindNodes), s.dir(kindDemand), s.dir(kindUsage), s.dir(kindSubnets), s.dir(kindPodNetworks)}
	err := s.readView(ctx, nil, dirs, func(v *view) error {
		p = Planning{Demands: map[string]Demand{}, Usage: map[string]Usage{}}
		var err error
		if p.Nodes, err = listSound[*Node](v, kindNodes, &p.Quarantined); err != nil {
			return err
		}
		ds, err := listSound[*Demand](v, kindDemand, &p.Quarantined)
		if err != nil {
			return err
		}
		for _, d := range ds {
			p.Demands[d.InstanceID] = d
		}
		us, err := listSound[*Usage](v, kindUsage, &p.Quarantined)
		if err != nil {
			return err
		}
		for _, u := range us {
			p.Usage[u.InstanceID] = u
		}
		if p.Subnets, err = listSound[*Subnet](v, kindSubnets, &p.Quarantined); err != nil {
			return err
		}
		p.PodNetworks, err = listSound[*PodNetwork](v, kindPodNetworks, &p.Quarantined)
		return err
	})
	if err != nil {
		return Planning{}, err
	}
	slices.SortFunc(p.Nodes, nodesByID)
	slices.SortFunc(p.Subnets, subnetsByID)
	return p, nil
}

// listSound is list that sets aside what does not decode into bad.
func listSound[P interface {
	*T
	record
}, T any](v *view, kind string, bad *[]Quarantined) ([]T, error) {
	dir := v.s.dir(kind)
	kvs, err := v.rawRange(dir)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(kvs))
	for _, kv := range kvs {
		var t T
		key := string(kv.Key)
		id := strings.TrimPrefix(key, dir)
		if err := decode(key, kv.Value, kv.ModRevision, id, P(&t)); err != nil {
			*bad = append(*bad, Quarantined{Kind: kind, ID: id, Key: key, Err: err.Error()})
			continue
		}
		out = append(out, t)
	}
	return out, nil
}
