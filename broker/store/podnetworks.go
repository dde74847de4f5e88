package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// kindPodNetworks holds one record per pod network, by name.
const kindPodNetworks = "podnetworks"

// NodeSelector says which nodes a pod network applies to; every field set
// must match. NodeGroup is the instance tag eks:nodegroup-name.
type NodeSelector struct {
	AvailabilityZone string            `json:"az,omitempty"`
	NodeGroup        string            `json:"node_group,omitempty"`
	InstanceTags     map[string]string `json:"instance_tags,omitempty"`
}

// PodNetwork sends the new ENIs of the nodes Selector matches into its
// subnets with its security groups. The admin writes every field but
// Discovered and DiscoveredAt, which the leader's subnet discovery writes
// from SubnetTags.
type PodNetwork struct {
	V              int               `json:"v"`
	Name           string            `json:"name"`
	Selector       NodeSelector      `json:"selector"`
	SubnetIDs      []string          `json:"subnet_ids,omitempty"`
	SubnetTags     map[string]string `json:"subnet_tags,omitempty"`
	SecurityGroups []string          `json:"security_groups,omitempty"`
	Discovered     []string          `json:"discovered_subnet_ids,omitempty"`
	DiscoveredAt   time.Time         `json:"discovered_at,omitzero"`
	UpdatedAt      time.Time         `json:"updated_at"`
	Rev            int64             `json:"-"`
}

func (r *PodNetwork) schema() int      { return r.V }
func (r *PodNetwork) setSchema()       { r.V = SchemaVersion }
func (r *PodNetwork) recordID() string { return r.Name }
func (r *PodNetwork) setRev(rev int64) { r.Rev = rev }

// Subnets returns the subnets the network names and the ones its tags
// found, each once, sorted.
func (p PodNetwork) Subnets() []string {
	out := append(slices.Clone(p.SubnetIDs), p.Discovered...)
	slices.Sort(out)
	return slices.Compact(out)
}

// PutPodNetwork creates or replaces a pod network. expectedRev 0 writes
// whatever is stored; -1 requires that none exists; anything else requires
// the stored record to be at that revision (rpcerr.ErrConflict otherwise).
// What discovery found is kept while SubnetTags stay the same.
func (s *Store) PutPodNetwork(ctx context.Context, pn PodNetwork, expectedRev int64) (PodNetwork, error) {
	if err := checkID("pod network", pn.Name); err != nil {
		return PodNetwork{}, err
	}
	out := pn
	rev, err := s.update(ctx, "PutPodNetwork", []string{s.key(kindPodNetworks, pn.Name)}, nil, func(v *view) error {
		var cur PodNetwork
		ok, err := get(v, kindPodNetworks, pn.Name, &cur)
		if err != nil {
			return err
		}
		switch {
		case expectedRev == -1 && ok:
			return fmt.Errorf("pod network %s already exists (revision %d): %w", pn.Name, cur.Rev, rpcerr.ErrConflict)
		case expectedRev > 0 && (!ok || cur.Rev != expectedRev):
			return fmt.Errorf("pod network %s is at revision %d, not %d: %w", pn.Name, cur.Rev, expectedRev, rpcerr.ErrConflict)
		}
		out = pn
		out.Discovered, out.DiscoveredAt = nil, time.Time{}
		if ok && maps.Equal(cur.SubnetTags, pn.SubnetTags) {
			out.Discovered, out.DiscoveredAt = cur.Discovered, cur.DiscoveredAt
		}
		out.UpdatedAt = time.Now().UTC()
		return v.put(s.key(kindPodNetworks, pn.Name), &out)
	})
	out.Rev = rev
	return out, err
}

// SetDiscoveredSubnets records the subnets a pod network's tags found.
// Nothing is written when they are unchanged; a network deleted meanwhile
// is rpcerr.ErrNotFound.
func (s *Store) SetDiscoveredSubnets(ctx context.Context, name string, ids []string, at time.Time) error {
	if err := checkID("pod network", name); err != nil {
		return err
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	_, err := s.update(ctx, "SetDiscoveredSubnets", []string{s.key(kindPodNetworks, name)}, nil, func(v *view) error {
		var cur PodNetwork
		ok, err := get(v, kindPodNetworks, name, &cur)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("pod network %s: %w", name, rpcerr.ErrNotFound)
		}
		if slices.Equal(cur.Discovered, ids) && !cur.DiscoveredAt.IsZero() {
			return nil
		}
		cur.Discovered, cur.DiscoveredAt = ids, at.UTC()
		return v.put(s.key(kindPodNetworks, name), &cur)
	})
	return err
}

// GetPodNetwork returns one pod network; rpcerr.ErrNotFound if absent.
func (s *Store) GetPodNetwork(ctx context.Context, name string) (PodNetwork, error) {
	return getOne[*PodNetwork](ctx, s, kindPodNetworks, "pod network", name)
}

// ListPodNetworks returns every pod network, sorted by name. A record that
// does not decode fails the list: a node placed by a network that silently
// vanished would put its ENIs in the wrong subnet.
func (s *Store) ListPodNetworks(ctx context.Context) ([]PodNetwork, error) {
	out, err := listAll[*PodNetwork](ctx, s, kindPodNetworks)
	slices.SortFunc(out, func(a, b PodNetwork) int { return strings.Compare(a.Name, b.Name) })
	return out, err
}

// DeletePodNetwork removes a pod network; rpcerr.ErrNotFound if absent.
// ENIs already in its subnets stay where they are.
func (s *Store) DeletePodNetwork(ctx context.Context, name string) error {
	if err := checkID("pod network", name); err != nil {
		return err
	}
	_, err := s.update(ctx, "DeletePodNetwork", []string{s.key(kindPodNetworks, name)}, nil, func(v *view) error {
		kv, err := v.raw(s.key(kindPodNetworks, name))
		if err != nil {
			return err
		}
		if kv == nil {
			return fmt.Errorf("pod network %s: %w", name, rpcerr.ErrNotFound)
		}
		v.del(s.key(kindPodNetworks, name))
		return nil
	})
	return err
}
