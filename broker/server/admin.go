package server

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// adminService shows operators what the broker knows: per-node ENI and
// address state and cluster totals, aws-vpc-cni's /v1/enis for the whole
// cluster in one place.
type adminService struct {
	allotv1.UnimplementedAdminServiceServer
	st      AdminStore
	leader  LeaderInfo
	checker Checker
	logs    RecentLogs
}

// GetLogs returns the replica's latest log records, the newest max_records
// of them when that is set.
func (s *adminService) GetLogs(_ context.Context, req *allotv1.GetLogsRequest) (*allotv1.GetLogsResponse, error) {
	if s.logs == nil {
		return nil, status.Error(codes.Unimplemented, "this broker keeps no log records in memory")
	}
	lines := s.logs.Lines()
	if n := int(req.GetMaxRecords()); n > 0 {
		lines = lastLines(lines, n)
	}
	return &allotv1.GetLogsResponse{Records: lines}, nil
}

// lastLines returns the last n newline-terminated lines of b.
func lastLines(b []byte, n int) []byte {
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if b[i] == '\n' {
			if n--; n == 0 {
				return b[i+1:]
			}
		}
	}
	return b
}

// Check compares EC2, etcd and the agents' reports and lists every
// disagreement; it changes nothing.
func (s *adminService) Check(ctx context.Context, req *allotv1.CheckRequest) (*allotv1.CheckResponse, error) {
	if s.checker == nil {
		return nil, status.Error(codes.Unimplemented, "this broker was built without a checker")
	}
	return s.checker.Check(ctx, time.Duration(req.GetStaleAfterSeconds())*time.Second)
}

// adminState is what ListNodes and GetStatus both need.
type adminState struct {
	*view
	demands map[string]store.Demand
	alive   map[string]bool
	intents []store.Intent
}

func (s *adminService) load(ctx context.Context) (*adminState, error) {
	v, err := loadView(ctx, s.st)
	if err != nil {
		return nil, err
	}
	st := &adminState{view: v, demands: v.demands}
	if st.alive, err = s.st.Alive(ctx); err != nil {
		return nil, fmt.Errorf("list live nodes: %w", err)
	}
	if st.intents, err = s.st.ListOpenIntents(ctx); err != nil {
		return nil, fmt.Errorf("list open intents: %w", err)
	}
	return st, nil
}

// nodeSummaries computes one line per node, in the store's node order.
func nodeSummaries(st *adminState) []*allotv1.NodeSummary {
	busy := map[string]bool{}
	for _, in := range st.intents {
		busy[in.InstanceID] = true
	}
	out := make([]*allotv1.NodeSummary, 0, len(st.nodes))
	subnets := subnetsByID(st.subnets)
	now := time.Now()
	for _, n := range st.nodes {
		enis := st.enisBy[n.InstanceID]
		sum := &allotv1.NodeSummary{
			InstanceId:          n.InstanceID,
			NodeName:            n.NodeName,
			InstanceType:        n.InstanceType,
			AvailabilityZone:    n.AvailabilityZone,
			SubnetId:            n.SubnetID,
			Enis:                int32(len(enis)),
			MaxEnis:             int32(n.MaxENIs),
			Pending:             int32(st.demands[n.InstanceID].Pending),
			WarmShortfall:       int32(st.demands[n.InstanceID].WarmShortfall),
			Alive:               st.alive[n.InstanceID],
			OperationInProgress: busy[n.InstanceID],
			UnmetReason:         st.statuses[n.InstanceID].Reason,
			UnmetMessage:        st.statuses[n.InstanceID].Message,
			Mode:                nodeMode(n),
			PrefixFallback:      prefixFallback(st.podnets, n, enis, subnets, now),
		}
		for _, e := range enis {
			sum.Attached += int32(len(e.Addresses) + len(e.Prefixes)*16)
		}
		if u, ok := st.usage[n.InstanceID]; ok {
			ix := newAddrIndex(enis)
			for _, a := range u.Assigned {
				if _, ok := ix.owner(a); ok {
					sum.Assigned++
				}
			}
			for _, a := range u.Free {
				if _, ok := ix.owner(a); ok {
					sum.Warm++
				}
			}
		}
		out = append(out, sum)
	}
	return append(out, quarantinedSummaries(st)...)
}

// quarantinedSummaries is a line for each node whose registration does not
// decode, so operators see it instead of the node vanishing from the list.
func quarantinedSummaries(st *adminState) []*allotv1.NodeSummary {
	var out []*allotv1.NodeSummary
	seen := map[string]bool{}
	for _, q := range st.quarantined {
		if q.Kind != "nodes" || seen[q.ID] {
			continue
		}
		seen[q.ID] = true
		out = append(out, &allotv1.NodeSummary{
			InstanceId: q.ID, Alive: st.alive[q.ID], UnmetReason: store.UnmetQuarantined,
			UnmetMessage: fmt.Sprintf("record %s does not decode; the node is left out of planning until it is fixed: %s", q.Key, q.Err),
		})
	}
	return out
}

// ListNodes returns every registered node with its totals.
func (s *adminService) ListNodes(ctx context.Context, _ *allotv1.ListNodesRequest) (*allotv1.ListNodesResponse, error) {
	st, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	return &allotv1.ListNodesResponse{Nodes: nodeSummaries(st)}, nil
}

// ListENIs returns every ENI the broker records, or one node's.
func (s *adminService) ListENIs(ctx context.Context, req *allotv1.ListENIsRequest) (*allotv1.ListENIsResponse, error) {
	var (
		enis []store.ENI
		err  error
	)
	if id := req.GetInstanceId(); id != "" {
		enis, err = s.st.ListNodeENIs(ctx, id)
	} else {
		enis, err = s.st.ListENIs(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("list enis: %w", err)
	}
	subnets, err := s.st.ListSubnets(ctx)
	if err != nil {
		return nil, fmt.Errorf("list subnets: %w", err)
	}
	cidrs := subnetCIDRs(subnets)
	resp := &allotv1.ListENIsResponse{Enis: make([]*allotv1.NodeENI, 0, len(enis))}
	for _, e := range enis {
		resp.Enis = append(resp.Enis, &allotv1.NodeENI{InstanceId: e.InstanceID, Eni: eniProto(e, cidrs), Status: e.Status})
	}
	return resp, nil
}

// GetStatus returns the leader's name and cluster totals.
func (s *adminService) GetStatus(ctx context.Context, _ *allotv1.GetStatusRequest) (*allotv1.GetStatusResponse, error) {
	st, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	resp := &allotv1.GetStatusResponse{
		Nodes:       int32(len(st.nodes)),
		OpenIntents: int32(len(st.intents)),
	}
	if s.leader != nil {
		if resp.Leader, err = s.leader.Leader(ctx); err != nil {
			return nil, err
		}
	}
	for _, n := range st.nodes {
		resp.MaxAddresses += maxAddresses(n)
	}
	for _, sum := range nodeSummaries(st) {
		resp.Attached += int64(sum.Attached)
		resp.Assigned += int64(sum.Assigned)
		if sum.OperationInProgress {
			resp.NodesWithOperationInProgress++
		}
	}
	return resp, nil
}
