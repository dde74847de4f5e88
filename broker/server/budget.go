package server

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/broker/ec2client"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// budgetService answers capacity planners from the store's records; the
// figures come from Figures, a pure function.
type budgetService struct {
	allotv1.UnimplementedBudgetServiceServer
	st    BudgetStore
	hub   *hub
	log   *slog.Logger
	types InstanceTypes
}

// GetCapacity returns every subnet's figures, each zone's and the
// cluster's, from one read.
func (s *budgetService) GetCapacity(ctx context.Context, _ *allotv1.GetCapacityRequest) (*allotv1.GetCapacityResponse, error) {
	v, err := loadView(ctx, s.st)
	if err != nil {
		return nil, err
	}
	return capacity(v), nil
}

// GetMaxPods computes kubelet's max-pods for an instance type from EC2's
// description of it.
func (s *budgetService) GetMaxPods(ctx context.Context, req *allotv1.GetMaxPodsRequest) (*allotv1.GetMaxPodsResponse, error) {
	if s.types == nil {
		return nil, status.Error(codes.Unimplemented, "this broker was built without an EC2 client for instance types")
	}
	name := req.GetInstanceType()
	if name == "" {
		return nil, fmt.Errorf("instance_type is required: %w", rpcerr.ErrInvalid)
	}
	its, err := s.types.DescribeInstanceTypes(ctx, []string{name})
	if ec2client.Code(err) == "InvalidInstanceType" {
		return nil, fmt.Errorf("instance type %s: EC2 does not know it: %w", name, rpcerr.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("describe instance type %s: %w", name, err)
	}
	it, ok := its[name]
	if !ok {
		return nil, fmt.Errorf("instance type %s: EC2 does not know it: %w", name, rpcerr.ErrNotFound)
	}
	prefix := req.GetMode() == allotv1.AddressMode_ADDRESS_MODE_PREFIX
	if prefix && !it.Nitro {
		return nil, fmt.Errorf("instance type %s is not on Nitro and cannot take /28 prefixes: %w", name, rpcerr.ErrInvalid)
	}
	n, formula := MaxPods(it.MaxENIs, it.IPv4PerENI, it.VCPUs, prefix)
	return &allotv1.GetMaxPodsResponse{
		InstanceType: name, Mode: req.GetMode(), MaxPods: n, MaxEnis: int32(it.MaxENIs),
		Ipv4PerEni: int32(it.IPv4PerENI), Vcpus: int32(it.VCPUs), Formula: formula,
	}, nil
}

// GetSubnetBudget returns one subnet's figures.
func (s *budgetService) GetSubnetBudget(ctx context.Context, req *allotv1.GetSubnetBudgetRequest) (*allotv1.SubnetBudget, error) {
	v, err := loadView(ctx, s.st)
	if err != nil {
		return nil, err
	}
	return findBudget(v, req.GetSubnetId())
}

func findBudget(v *view, id string) (*allotv1.SubnetBudget, error) {
	for _, sn := range v.subnets {
		if sn.ID == id {
			nodes, closed := v.podNodes()
			b := Figures(sn, nodes, v.enis, v.usage, closed)
			b.Revision = v.rev
			return b, nil
		}
	}
	return nil, fmt.Errorf("subnet %s has no budget record (the broker records a subnet when a node in it registers, or at start when --pod-subnet-* selects it): %w",
		id, rpcerr.ErrNotFound)
}

// ListSubnetBudgets returns every subnet's figures, sorted by subnet ID.
func (s *budgetService) ListSubnetBudgets(ctx context.Context, _ *allotv1.ListSubnetBudgetsRequest) (*allotv1.ListSubnetBudgetsResponse, error) {
	v, err := loadView(ctx, s.st)
	if err != nil {
		return nil, err
	}
	return &allotv1.ListSubnetBudgetsResponse{Budgets: budgets(v)}, nil
}

// WatchSubnetBudgets sends every subnet, then each subnet again whenever
// one of its figures changes.
func (s *budgetService) WatchSubnetBudgets(_ *allotv1.WatchSubnetBudgetsRequest, stream allotv1.BudgetService_WatchSubnetBudgetsServer) error {
	sub, err := s.hub.subscribeBudgets(stream.Context())
	if err != nil {
		return err
	}
	defer sub.close()
	sent := map[string]*allotv1.SubnetBudget{}
	for {
		v, err := sub.next(stream.Context())
		if err != nil {
			return err
		}
		for _, b := range budgets(v) {
			if sameBudget(sent[b.GetSubnetId()], b) {
				continue
			}
			if err := stream.Send(b); err != nil {
				return err
			}
			sent[b.GetSubnetId()] = b
		}
	}
}

// SetSubnetBudget changes a subnet's headroom and cap and returns the new
// figures.
func (s *budgetService) SetSubnetBudget(ctx context.Context, req *allotv1.SetSubnetBudgetRequest) (*allotv1.SubnetBudget, error) {
	sn, err := s.st.SetSubnetBudget(ctx, req.GetSubnetId(), req.GetHeadroom(), req.GetCap())
	if err != nil {
		return nil, fmt.Errorf("set budget of %s: %w", req.GetSubnetId(), err)
	}
	s.log.Info("subnet budget set", "subnet_id", sn.ID, "headroom", sn.Headroom, "cap", sn.Cap, "limit", sn.Limit())
	v, err := loadView(ctx, s.st)
	if err != nil {
		return nil, err
	}
	return findBudget(v, sn.ID)
}
