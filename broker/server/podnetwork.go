package server

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/podnet"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// PodNetworkStore is what PodNetworkService reads and writes.
type PodNetworkStore interface {
	PutPodNetwork(ctx context.Context, pn store.PodNetwork, expectedRev int64) (store.PodNetwork, error)
	GetPodNetwork(ctx context.Context, name string) (store.PodNetwork, error)
	ListPodNetworks(ctx context.Context) ([]store.PodNetwork, error)
	DeletePodNetwork(ctx context.Context, name string) error
	// ReadPlanning gives the registered nodes, setting aside the records
	// that do not decode.
	ReadPlanning(ctx context.Context) (store.Planning, error)
	PutSubnet(ctx context.Context, sn store.Subnet) (store.Subnet, error)
}

// Subnets is EC2's word on subnets (broker/ec2client), asked before a pod
// network is stored.
type Subnets interface {
	DescribeSubnets(ctx context.Context, ids []string) ([]ec2client.SubnetInfo, error)
}

var (
	_ PodNetworkStore = (*store.Store)(nil)
	_ Subnets         = (*ec2client.Client)(nil)
)

// podNetworkService keeps the pod networks. Set checks a network against
// EC2 and the registered nodes before it writes anything, so a subnet in
// the wrong zone or VPC is refused here rather than found by the engine.
type podNetworkService struct {
	allotv1.UnimplementedPodNetworkServiceServer
	st      PodNetworkStore
	subnets Subnets
	log     *slog.Logger
}

func (s *podNetworkService) ListPodNetworks(ctx context.Context, _ *allotv1.ListPodNetworksRequest) (*allotv1.ListPodNetworksResponse, error) {
	all, err := s.st.ListPodNetworks(ctx)
	if err != nil {
		return nil, fmt.Errorf("list pod networks: %w", err)
	}
	out := &allotv1.ListPodNetworksResponse{}
	for _, pn := range all {
		out.Networks = append(out.Networks, podNetworkProto(pn))
	}
	return out, nil
}

func (s *podNetworkService) GetPodNetwork(ctx context.Context, req *allotv1.GetPodNetworkRequest) (*allotv1.PodNetwork, error) {
	pn, err := s.st.GetPodNetwork(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return podNetworkProto(pn), nil
}

func (s *podNetworkService) DeletePodNetwork(ctx context.Context, req *allotv1.DeletePodNetworkRequest) (*allotv1.DeletePodNetworkResponse, error) {
	if err := s.st.DeletePodNetwork(ctx, req.GetName()); err != nil {
		return nil, err
	}
	s.log.Info("pod network deleted", "pod_network", req.GetName())
	return &allotv1.DeletePodNetworkResponse{}, nil
}

// SetPodNetwork checks the network against EC2 (every named subnet exists,
// all in one VPC, in the selector's zone if it names one) and against the
// registered nodes it selects (in that VPC; with a subnet in their zone
// unless subnet tags may still find one), records its subnets so their
// budgets are known at once, and stores it.
func (s *podNetworkService) SetPodNetwork(ctx context.Context, req *allotv1.SetPodNetworkRequest) (*allotv1.PodNetwork, error) {
	if s.subnets == nil {
		return nil, status.Error(codes.Unimplemented, "this broker was built without an EC2 client to check subnets with")
	}
	pn := podNetworkRecord(req.GetNetwork())
	infos, err := s.describe(ctx, pn.SubnetIDs)
	if err != nil {
		return nil, err
	}
	if err := checkSubnetPlaces(pn, infos); err != nil {
		return nil, err
	}
	p, err := s.st.ReadPlanning(ctx)
	if err != nil {
		return nil, fmt.Errorf("pod network %s: read the nodes to check it against: %w", pn.Name, err)
	}
	if err := checkSelectedNodes(pn, infos, p.Nodes); err != nil {
		return nil, err
	}
	for _, x := range infos {
		if err := recordSubnet(ctx, s.st, x); err != nil {
			return nil, fmt.Errorf("pod network %s: %w", pn.Name, err)
		}
	}
	saved, err := s.st.PutPodNetwork(ctx, pn, req.GetExpectedRevision())
	if err != nil {
		return nil, err
	}
	s.log.Info("pod network set", "pod_network", pn.Name, "subnets", pn.SubnetIDs, "subnet_tags", pn.SubnetTags,
		"security_groups", pn.SecurityGroups, "revision", saved.Rev)
	return podNetworkProto(saved), nil
}

// describe asks EC2 for the named subnets; one that does not exist is the
// caller's mistake.
func (s *podNetworkService) describe(ctx context.Context, ids []string) ([]ec2client.SubnetInfo, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	infos, err := s.subnets.DescribeSubnets(ctx, ids)
	switch {
	case ec2client.IsNotFound(err) || ec2client.IsMalformed(err):
		return nil, fmt.Errorf("subnets %s: EC2 says: %v: %w", strings.Join(ids, ", "), err, rpcerr.ErrInvalid)
	case err != nil:
		return nil, fmt.Errorf("describe subnets %s: %v: %w", strings.Join(ids, ", "), err, rpcerr.ErrUnavailable)
	}
	for _, id := range ids {
		if !slices.ContainsFunc(infos, func(x ec2client.SubnetInfo) bool { return x.ID == id }) {
			return nil, fmt.Errorf("subnet %s: EC2 does not know it: %w", id, rpcerr.ErrInvalid)
		}
	}
	return infos, nil
}

// checkSubnetPlaces refuses subnets in more than one VPC, or outside the
// selector's zone.
func checkSubnetPlaces(pn store.PodNetwork, infos []ec2client.SubnetInfo) error {
	for _, x := range infos {
		if x.VPCID != infos[0].VPCID {
			return fmt.Errorf("pod network %s: subnet %s is in %s but subnet %s is in %s: a pod network's subnets must share one VPC: %w",
				pn.Name, x.ID, x.VPCID, infos[0].ID, infos[0].VPCID, rpcerr.ErrInvalid)
		}
		if az := pn.Selector.AvailabilityZone; az != "" && x.AZ != az {
			return fmt.Errorf("pod network %s: subnet %s is in zone %s, but the selector picks nodes in %s: an ENI must be in its node's zone: %w",
				pn.Name, x.ID, x.AZ, az, rpcerr.ErrInvalid)
		}
	}
	return nil
}

// checkSelectedNodes refuses a network that a registered node would follow
// but could not use: the node is in another VPC, or no named subnet is in
// its zone and no subnet tag could find one.
func checkSelectedNodes(pn store.PodNetwork, infos []ec2client.SubnetInfo, nodes []store.Node) error {
	for _, n := range nodes {
		if !podnet.Matches(pn.Selector, n) {
			continue
		}
		if len(infos) > 0 && n.VPCID != "" && n.VPCID != infos[0].VPCID {
			return fmt.Errorf("pod network %s selects node %s in %s, but its subnets are in %s: %w",
				pn.Name, n.InstanceID, n.VPCID, infos[0].VPCID, rpcerr.ErrInvalid)
		}
		inZone := slices.ContainsFunc(infos, func(x ec2client.SubnetInfo) bool { return x.AZ == n.AvailabilityZone })
		if !inZone && len(pn.SubnetTags) == 0 {
			return fmt.Errorf("pod network %s selects node %s in zone %s, but none of its subnets is in that zone: %w",
				pn.Name, n.InstanceID, n.AvailabilityZone, rpcerr.ErrInvalid)
		}
	}
	return nil
}

// recordSubnet makes sure a pod network's subnet has a record, so its
// budget is listed and the engine can place ENIs in it at once. An
// existing record is left to discovery and the reconciler.
func recordSubnet(ctx context.Context, st PodNetworkStore, x ec2client.SubnetInfo) error {
	usable, err := store.UsableAddresses(x.CIDR)
	if err != nil {
		return fmt.Errorf("subnet %s: %w", x.ID, err)
	}
	if _, err := st.PutSubnet(ctx, store.Subnet{ID: x.ID, CIDR: x.CIDR, AvailabilityZone: x.AZ, VPCID: x.VPCID, Usable: usable}); err != nil {
		return fmt.Errorf("record subnet %s: %w", x.ID, err)
	}
	return nil
}

func podNetworkRecord(p *allotv1.PodNetwork) store.PodNetwork {
	return store.PodNetwork{
		Name: p.GetName(),
		Selector: store.NodeSelector{
			AvailabilityZone: p.GetSelector().GetAvailabilityZone(),
			NodeGroup:        p.GetSelector().GetNodeGroup(),
			InstanceTags:     maps.Clone(p.GetSelector().GetInstanceTags()),
		},
		SubnetIDs:      slices.Clone(p.GetSubnetIds()),
		SubnetTags:     maps.Clone(p.GetSubnetTags()),
		SecurityGroups: slices.Clone(p.GetSecurityGroupIds()),
	}
}

func podNetworkProto(pn store.PodNetwork) *allotv1.PodNetwork {
	return &allotv1.PodNetwork{
		Name: pn.Name,
		Selector: &allotv1.NodeSelector{
			AvailabilityZone: pn.Selector.AvailabilityZone,
			NodeGroup:        pn.Selector.NodeGroup,
			InstanceTags:     maps.Clone(pn.Selector.InstanceTags),
		},
		SubnetIds:           slices.Clone(pn.SubnetIDs),
		SubnetTags:          maps.Clone(pn.SubnetTags),
		SecurityGroupIds:    slices.Clone(pn.SecurityGroups),
		DiscoveredSubnetIds: slices.Clone(pn.Discovered),
		Revision:            pn.Rev,
	}
}
