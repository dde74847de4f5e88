package server

import (
	"context"
	"fmt"
	"log/slog"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// budgetService answers capacity planners from the store's records; the
// figures come from Figures, a pure function.
type budgetService struct {
	allotv1.UnimplementedBudgetServiceServer
	st  BudgetStore
	hub *hub
	log *slog.Logger
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
			b := Figures(sn, v.nodes, v.enis, v.usage)
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
