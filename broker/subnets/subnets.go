// Package subnets finds the subnets of the cluster's pod networks in EC2
// and records each in etcd with its size, on the leader, at start and then
// at an interval. A subnet is then known, and listed with its budget,
// before any node in it registers; the reconciler keeps the records true.
package subnets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/allotnet/allot/broker/clock"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/store"
)

// Selector says which subnets are the cluster's pod subnets: the ones
// named by ID, plus those of the VPCs in VPCIDs, narrowed to those
// carrying every tag in Tags when Tags is set (an empty value matches any
// value of the key). Tags without VPCIDs select tagged subnets in any VPC
// of the account, which is only right when the tag names this cluster.
type Selector struct {
	IDs    []string
	VPCIDs []string
	Tags   map[string]string
}

// Empty reports whether the selector selects nothing: subnets are then
// known only once a node in them registers.
func (s Selector) Empty() bool { return len(s.IDs) == 0 && len(s.VPCIDs) == 0 && len(s.Tags) == 0 }

// EC2 is what discovery asks EC2.
type EC2 interface {
	DescribeSubnets(ctx context.Context, ids []string) ([]ec2client.SubnetInfo, error)
	FindSubnets(ctx context.Context, f ec2client.SubnetFilter) ([]ec2client.SubnetInfo, error)
}

// Store is what discovery records.
type Store interface {
	PutSubnet(ctx context.Context, sn store.Subnet) (store.Subnet, error)
	SetUsedByOthers(ctx context.Context, id string, n int64) (store.Subnet, error)
	ListPodNetworks(ctx context.Context) ([]store.PodNetwork, error)
	SetDiscoveredSubnets(ctx context.Context, name string, ids []string, at time.Time) error
}

var (
	_ EC2   = (*ec2client.Client)(nil)
	_ Store = (*store.Store)(nil)
)

// Config is everything discovery needs; main builds it.
type Config struct {
	Selector Selector
	EC2      EC2
	Store    Store
	Logger   *slog.Logger
	// Interval is the time between refreshes; default 1m, in Clock's time.
	Interval time.Duration
	Clock    clock.Clock
}

// Discoverer records the selected subnets. Only the leader runs it.
type Discoverer struct {
	cfg Config
	log *slog.Logger
	// recorded is what this run last wrote per subnet, so an unchanged
	// subnet costs no write.
	recorded map[string]ec2client.SubnetInfo
	// found is what each pod network's tags last found, and warned the
	// problem last logged about it, so the log says each once.
	found  map[string][]string
	warned map[string]string
	// places is what EC2 never changes about a subnet (its VPC, zone and
	// CIDR), by ID, so a subnet a pod network names is described once.
	places map[string]ec2client.SubnetInfo
}

// New returns a discoverer.
func New(cfg Config) *Discoverer {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	cfg.Interval = cfg.Clock.Wall(cfg.Interval)
	return &Discoverer{cfg: cfg, log: cfg.Logger.With("component", "subnets"), recorded: map[string]ec2client.SubnetInfo{},
		found: map[string][]string{}, warned: map[string]string{}, places: map[string]ec2client.SubnetInfo{}}
}

// Run refreshes now and then every Interval until ctx ends; it returns nil
// then. A failed refresh is logged and tried again at the next tick. It
// runs even when the selector is empty: pod networks may name subnet tags.
func (d *Discoverer) Run(ctx context.Context) error {
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := d.Refresh(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("discovering pod subnets", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Find asks EC2 for the selected subnets, sorted by ID, each once.
func (d *Discoverer) Find(ctx context.Context) ([]ec2client.SubnetInfo, error) {
	sel := d.cfg.Selector
	var all []ec2client.SubnetInfo
	if len(sel.IDs) > 0 {
		xs, err := d.cfg.EC2.DescribeSubnets(ctx, sel.IDs)
		if err != nil {
			return nil, fmt.Errorf("describe subnets %v: %w", sel.IDs, err)
		}
		all = append(all, xs...)
	}
	if len(sel.VPCIDs) > 0 || len(sel.Tags) > 0 {
		xs, err := d.cfg.EC2.FindSubnets(ctx, ec2client.SubnetFilter{VPCIDs: sel.VPCIDs, Tags: sel.Tags})
		if err != nil {
			return nil, fmt.Errorf("find subnets in VPCs %v with tags %v: %w", sel.VPCIDs, sel.Tags, err)
		}
		all = append(all, xs...)
	}
	seen := map[string]bool{}
	out := all[:0]
	for _, x := range all {
		if !seen[x.ID] {
			seen[x.ID] = true
			out = append(out, x)
		}
	}
	return out, nil
}

// Refresh records every selected subnet that is new or changed since this
// discoverer last recorded it, and returns how many it wrote. A new record
// starts with what EC2 says is in use counted as others' use, until the
// reconciler's first pass splits it exactly.
func (d *Discoverer) Refresh(ctx context.Context) (int, error) {
	var xs []ec2client.SubnetInfo
	if !d.cfg.Selector.Empty() {
		found, err := d.Find(ctx)
		if err != nil {
			return 0, err
		}
		xs = found
		d.learn(found)
	}
	tagged, perr := d.podNetworks(ctx)
	xs = append(xs, tagged...)
	errs := []error{perr}
	wrote := 0
	for _, x := range xs {
		if prev, ok := d.recorded[x.ID]; ok && prev.CIDR == x.CIDR && prev.AZ == x.AZ && prev.VPCID == x.VPCID {
			continue
		}
		usable, err := store.UsableAddresses(x.CIDR)
		if err != nil {
			errs = append(errs, fmt.Errorf("subnet %s: %w", x.ID, err))
			continue
		}
		sn, err := d.cfg.Store.PutSubnet(ctx, store.Subnet{ID: x.ID, CIDR: x.CIDR, AvailabilityZone: x.AZ, VPCID: x.VPCID, Usable: usable})
		if err != nil {
			errs = append(errs, fmt.Errorf("record subnet %s: %w", x.ID, err))
			continue
		}
		wrote++
		if others := usable - x.Available - sn.Attached - sn.Reserved; others > 0 && sn.UsedByOthers == 0 {
			if _, err := d.cfg.Store.SetUsedByOthers(ctx, x.ID, others); err != nil {
				errs = append(errs, fmt.Errorf("record subnet %s use by others: %w", x.ID, err))
			}
		}
		d.recorded[x.ID] = x
		d.log.Info("pod subnet recorded", "subnet", x.ID, "cidr", x.CIDR, "az", x.AZ, "vpc", x.VPCID, "usable", usable)
	}
	return wrote, errors.Join(errs...)
}
