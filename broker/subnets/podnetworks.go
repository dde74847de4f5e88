package subnets

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/internal/ec2filter"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// maxFilterValues is the most values EC2 takes in one filter.
const maxFilterValues = 200

// search is one pod network's tag lookup: its tags, in vpcs (nil: any).
type search struct {
	pn   store.PodNetwork
	vpcs []string
}

// podNetworks resolves the subnet tags of every pod network that names
// some, with one DescribeSubnets for all of them, records what each found
// when it differs from the network's record, and returns those subnets so
// they are recorded with their budgets too.
func (d *Discoverer) podNetworks(ctx context.Context) ([]ec2client.SubnetInfo, error) {
	pns, err := d.cfg.Store.ListPodNetworks(ctx)
	if err != nil {
		return nil, fmt.Errorf("list pod networks: %w", err)
	}
	pns = slices.DeleteFunc(pns, func(pn store.PodNetwork) bool { return len(pn.SubnetTags) == 0 })
	failed := d.learnNamed(ctx, pns)
	var errs []error
	var searches []search
	for _, pn := range pns {
		if err := failed[pn.Name]; err != nil {
			errs = append(errs, fmt.Errorf("pod network %s: %w", pn.Name, err))
			continue
		}
		vpcs, err := d.tagVPCs(pn)
		if err != nil {
			errs = append(errs, fmt.Errorf("pod network %s: %w", pn.Name, err))
			continue
		}
		searches = append(searches, search{pn: pn, vpcs: vpcs})
	}
	found, err := d.findAll(ctx, searches)
	if err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	var out []ec2client.SubnetInfo
	for _, s := range searches {
		xs := d.keep(s.pn, s.matching(found))
		if err := d.recordFound(ctx, s.pn, xs); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, xs...)
	}
	return out, errors.Join(errs...)
}

// learnNamed describes the subnets the pod networks name that this
// discoverer has not seen yet, in one call; when that call fails on a
// subnet EC2 does not know, network by network, so the error is the
// network's. It returns each network's failure by name.
func (d *Discoverer) learnNamed(ctx context.Context, pns []store.PodNetwork) map[string]error {
	var all []string
	needs := 0
	for _, pn := range pns {
		ids := d.unknown(pn.SubnetIDs)
		if len(ids) > 0 {
			needs++
		}
		for _, id := range ids {
			if !slices.Contains(all, id) {
				all = append(all, id)
			}
		}
	}
	failed := map[string]error{}
	if needs == 0 {
		return failed
	}
	if needs > 1 {
		xs, err := d.cfg.EC2.DescribeSubnets(ctx, all)
		switch {
		case err == nil:
			d.learn(xs)
			return failed
		case !ec2client.IsNotFound(err):
			for _, pn := range pns {
				if ids := d.unknown(pn.SubnetIDs); len(ids) > 0 {
					failed[pn.Name] = fmt.Errorf("describe subnets %v: %w", ids, err)
				}
			}
			return failed
		}
	}
	for _, pn := range pns {
		ids := d.unknown(pn.SubnetIDs)
		if len(ids) == 0 {
			continue
		}
		xs, err := d.cfg.EC2.DescribeSubnets(ctx, ids)
		if err != nil {
			failed[pn.Name] = fmt.Errorf("describe subnets %v: %w", ids, err)
			continue
		}
		d.learn(xs)
	}
	return failed
}

// unknown returns the subnets of ids this discoverer has not seen.
func (d *Discoverer) unknown(ids []string) []string {
	var out []string
	for _, id := range ids {
		if _, ok := d.places[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}

// learn keeps what never changes about subnets EC2 described: a subnet's
// ID names one VPC, zone and CIDR for its whole life.
func (d *Discoverer) learn(xs []ec2client.SubnetInfo) {
	for _, x := range xs {
		d.places[x.ID] = ec2client.SubnetInfo{ID: x.ID, CIDR: x.CIDR, AZ: x.AZ, VPCID: x.VPCID}
	}
}

// tagVPCs is where a pod network's tags are looked up: the VPC of the
// subnets it names, else the selector's VPCIDs, else (nil) every VPC of
// the account.
func (d *Discoverer) tagVPCs(pn store.PodNetwork) ([]string, error) {
	if len(pn.SubnetIDs) == 0 {
		return d.cfg.Selector.VPCIDs, nil
	}
	var vpcs []string
	for _, id := range pn.SubnetIDs {
		x, ok := d.places[id]
		if !ok {
			return nil, fmt.Errorf("subnet %s: EC2 did not describe it", id)
		}
		if !slices.Contains(vpcs, x.VPCID) {
			vpcs = append(vpcs, x.VPCID)
		}
	}
	return vpcs, nil
}

// findAll runs every search in one DescribeSubnets: the subnets carrying
// any of the searches' tag keys, within their VPCs when every search has
// some. Each search then keeps its own (search.matching). Only more tag
// keys than one filter takes need another call.
func (d *Discoverer) findAll(ctx context.Context, searches []search) ([]ec2client.SubnetInfo, error) {
	if len(searches) == 0 {
		return nil, nil
	}
	var keys, vpcs []string
	anyVPC := false
	for _, s := range searches {
		keys = slices.AppendSeq(keys, maps.Keys(s.pn.SubnetTags))
		vpcs = append(vpcs, s.vpcs...)
		anyVPC = anyVPC || len(s.vpcs) == 0
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	slices.Sort(vpcs)
	if vpcs = slices.Compact(vpcs); anyVPC || len(vpcs) > maxFilterValues {
		vpcs = nil
	}
	var out []ec2client.SubnetInfo
	for chunk := range slices.Chunk(keys, maxFilterValues) {
		xs, err := d.cfg.EC2.FindSubnets(ctx, ec2client.SubnetFilter{VPCIDs: vpcs, AnyTagKey: chunk})
		if err != nil {
			return nil, fmt.Errorf("pod networks: find subnets with any of the tag keys %v: %w", chunk, err)
		}
		for _, x := range xs {
			if !slices.ContainsFunc(out, func(y ec2client.SubnetInfo) bool { return y.ID == x.ID }) {
				out = append(out, x)
			}
		}
	}
	d.learn(out)
	return out, nil
}

// matching returns the subnets of all that the search asks for: in one of
// its VPCs (any when it has none) and carrying each of its tags, with the
// value given unless that is empty. Values compare as EC2's tag filters
// do, with its * and ? wildcards, so the result is what a DescribeSubnets
// for this search alone would give.
func (s search) matching(all []ec2client.SubnetInfo) []ec2client.SubnetInfo {
	var out []ec2client.SubnetInfo
	for _, x := range all {
		if len(s.vpcs) > 0 && !slices.Contains(s.vpcs, x.VPCID) {
			continue
		}
		ok := true
		for k, want := range s.pn.SubnetTags {
			got, has := x.Tags[k]
			ok = ok && has && (want == "" || ec2filter.Match(want, got))
		}
		if ok {
			out = append(out, x)
		}
	}
	return out
}

// keep returns the found subnets a node the network selects could use and
// logs the others: one outside the selector's zone is never offered to any
// of its nodes. Subnets in several VPCs (tags looked up in every VPC) are
// kept, as each node uses only its own VPC's, but logged: the network's
// security groups can belong to only one of them.
func (d *Discoverer) keep(pn store.PodNetwork, xs []ec2client.SubnetInfo) []ec2client.SubnetInfo {
	var kept []ec2client.SubnetInfo
	var problems []string
	for _, x := range xs {
		if az := pn.Selector.AvailabilityZone; az != "" && x.AZ != az {
			problems = append(problems, fmt.Sprintf("%s: in zone %s, the selector picks nodes in %s", x.ID, x.AZ, az))
			continue
		}
		kept = append(kept, x)
	}
	var vpcs []string
	for _, x := range kept {
		if !slices.Contains(vpcs, x.VPCID) {
			vpcs = append(vpcs, x.VPCID)
		}
	}
	if len(vpcs) > 1 {
		slices.Sort(vpcs)
		problems = append(problems, fmt.Sprintf("subnets found in more than one VPC (%s): a node uses only its own VPC's, and the security groups fit one", strings.Join(vpcs, ", ")))
	}
	if p := strings.Join(problems, "; "); p != d.warned[pn.Name] {
		if p != "" {
			d.log.Warn("pod network subnets left out or in doubt", "pod_network", pn.Name, "tags", pn.SubnetTags, "problems", p)
		}
		d.warned[pn.Name] = p
	}
	return kept
}

// recordFound writes what a network's tags found when it differs from the
// network's record (the record as listed at the start of this pass; the
// store compares again in its transaction).
func (d *Discoverer) recordFound(ctx context.Context, pn store.PodNetwork, xs []ec2client.SubnetInfo) error {
	ids := make([]string, 0, len(xs))
	for _, x := range xs {
		ids = append(ids, x.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(pn.Discovered, ids) || pn.DiscoveredAt.IsZero() {
		err := d.cfg.Store.SetDiscoveredSubnets(ctx, pn.Name, ids, d.cfg.Clock.Now())
		if err != nil && !errors.Is(err, rpcerr.ErrNotFound) {
			return fmt.Errorf("pod network %s: record discovered subnets: %w", pn.Name, err)
		}
	}
	if !slices.Equal(d.found[pn.Name], ids) {
		d.log.Info("pod network subnets discovered", "pod_network", pn.Name, "tags", pn.SubnetTags, "subnets", ids)
		d.found[pn.Name] = ids
	}
	return nil
}
