package server

import (
	"cmp"
	"context"
	"fmt"
	"go.opentelemetry.io/otel/propagation"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"google.golang.org/protobuf/proto"
)

// nodeService serves agents. Every method reads and writes etcd through
// the store, so any replica can serve any agent; only the leader's engine
// acts on what agents state here.
type nodeService struct {
	allotv1.UnimplementedNodeServiceServer
	st      NodeStore
	limits  LimitsSource
	facts   InstanceFacts // nil: the agent's claims are recorded as made
	hub     *hub
	nodeTTL time.Duration
	now     func() time.Time
	log     *slog.Logger
	// reads bounds the reads of a node's ENIs from etcd (ownENIs).
	reads readGate
	// demands writes the agents' demands together.
	demands *demandWriter
}

// Register records the node (idempotently) and returns the broker's record
// of its ENIs. The primary ENI is recorded by the engine, which reads it
// from EC2 rather than trusting the agent.
func (s *nodeService) Register(ctx context.Context, req *allotv1.RegisterRequest) (*allotv1.RegisterResponse, error) {
	id := req.GetNode()
	n := store.Node{
		InstanceID:       id.GetInstanceId(),
		InstanceType:     id.GetInstanceType(),
		AvailabilityZone: id.GetAvailabilityZone(),
		VPCID:            id.GetVpcId(),
		SubnetID:         id.GetSubnetId(),
		PrimaryENIID:     id.GetPrimaryEniId(),
		PrimaryIP:        id.GetPrimaryIp(),
		SecurityGroups:   slices.Clone(id.GetSecurityGroupIds()),
		NodeName:         req.GetNodeName(),
		Mode:             modeName(req.GetMode()),
		WarmIPTarget:     int(req.GetWarm().GetWarmIpTarget()),
		MinimumIPTarget:  int(req.GetWarm().GetMinimumIpTarget()),
		WarmENITarget:    int(req.GetWarm().GetWarmEniTarget()),
		WarmPrefixTarget: int(req.GetWarm().GetWarmPrefixTarget()),
		RegisteredAt:     s.now(),
	}
	if s.facts != nil {
		if err := checkClaims(ctx, s.facts, &n); err != nil {
			return nil, err
		}
	}
	if old, err := s.st.GetNode(ctx, n.InstanceID); err == nil {
		// Keep what the engine learned (limits) and when the node first came.
		n.MaxENIs, n.IPv4PerENI, n.RegisteredAt = old.MaxENIs, old.IPv4PerENI, old.RegisteredAt
	} else if !isNotFound(err) {
		return nil, fmt.Errorf("register %s: %w", n.InstanceID, err)
	}
	if err := s.applyLimits(ctx, &n, int(req.GetWarm().GetMaxEnis())); err != nil {
		return nil, err
	}
	saved, err := s.st.PutNode(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("register %s: %w", n.InstanceID, err)
	}
	rev, err := s.st.Revision(ctx)
	if err != nil {
		return nil, err
	}
	enis, rev, err := s.nodeENIs(ctx, n.InstanceID, rev)
	if err != nil {
		return nil, fmt.Errorf("register %s: %w", n.InstanceID, err)
	}
	s.log.Info("node registered", "instance_id", n.InstanceID, "node", n.NodeName, "instance_type", n.InstanceType,
		"mode", n.Mode, "enis", len(enis))
	return &allotv1.RegisterResponse{
		Enis:         enis,
		MaxAddresses: int32(maxAddresses(saved)),
		Revision:     rev,
		MaxEnis:      int32(saved.MaxENIs),
		Ipv4PerEni:   int32(saved.IPv4PerENI),
	}, nil
}

// registerPatience is how long Register waits for the hub to publish the
// node's registration before it reads the node's ENIs from etcd itself.
const registerPatience = time.Second

// nodeENIs returns the broker's record of the node's ENIs (primary first,
// then by device index, then by ID) as of revision rev or newer, and the
// revision it is as of: from the hub once it has caught up with rev, else
// read from etcd (ownENIs).
func (s *nodeService) nodeENIs(ctx context.Context, id string, rev int64) ([]*allotv1.ENI, int64, error) {
	// While every slot to read etcd is taken, keep waiting for a hub that
	// follows etcd: it is behind when etcd is slow, and more reads make
	// etcd slower. One that has stopped or lost the watch will not catch
	// up; then wait for a slot.
	for {
		if ns, at, ok := s.hub.nodeAt(ctx, id, rev, registerPatience); ok {
			return hubENIs(ns), at, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		if s.reads.free() || !s.hub.following() {
			break
		}
	}
	enis, err := s.ownENIs(ctx, id)
	if err != nil {
		return nil, 0, fmt.Errorf("list enis: %w", err)
	}
	subnets, err := s.st.ListSubnets(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list subnets: %w", err)
	}
	return enisProto(enis, subnetCIDRs(subnets)), rev, nil
}

// hubENIs is the node's ENIs as the hub published them, primary first,
// then by device index, then by ID.
func hubENIs(ns *nodeState) []*allotv1.ENI {
	var out []*allotv1.ENI
	if ns != nil {
		out = make([]*allotv1.ENI, 0, len(ns.ev.GetEnis()))
		for _, e := range ns.ev.GetEnis() {
			out = append(out, proto.CloneOf(e))
		}
	}
	slices.SortFunc(out, func(a, b *allotv1.ENI) int {
		return cmp.Or(boolFirst(a.GetPrimary(), b.GetPrimary()), cmp.Compare(a.GetDeviceIndex(), b.GetDeviceIndex()),
			strings.Compare(a.GetEniId(), b.GetEniId()))
	})
	return out
}

// ownENIs reads the node's ENIs from etcd as they are now. What the hub
// has published of the node, exactly as of its revision, narrows the read
// to those ENIs' keys and the ENI records written since; a hub that is not
// following etcd narrows nothing, and every ENI is read. Either way etcd
// scans every ENI record (it filters by revision after reading them), so
// at most readSlots of these reads run at once.
func (s *nodeService) ownENIs(ctx context.Context, id string) ([]store.ENI, error) {
	release, err := s.reads.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	ns, rev, live := s.hub.nodeAsOf(id)
	if !live {
		rev = 0
	}
	var known []store.ENI
	if ns != nil && live {
		known = ns.enis
	}
	enis, _, err := s.st.NodeENIsSince(ctx, id, known, rev)
	return enis, err
}

// boolFirst orders true before false.
func boolFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// applyLimits fills the node's ENI limits from the instance type, capped by
// the agent's max_enis, and refuses prefix mode on a type that can't do it.
func (s *nodeService) applyLimits(ctx context.Context, n *store.Node, maxENIs int) error {
	if s.limits != nil {
		l, ok, err := s.limits.Limits(ctx, n.InstanceType)
		if err != nil {
			return fmt.Errorf("register %s: instance type %s: %w", n.InstanceID, n.InstanceType, err)
		}
		if ok {
			if n.Mode == store.ModePrefix && !l.PrefixCapable {
				return fmt.Errorf("register %s: instance type %s cannot take /28 prefixes (not Nitro); use secondary-IP mode: %w",
					n.InstanceID, n.InstanceType, rpcerr.ErrInvalid)
			}
			n.MaxENIs, n.IPv4PerENI = l.MaxENIs, l.IPv4PerENI
		}
	}
	if maxENIs > 0 && (n.MaxENIs == 0 || maxENIs < n.MaxENIs) {
		n.MaxENIs = maxENIs
	}
	return nil
}

// ReportUsage records which addresses pods hold. A node may only report
// addresses on its own ENIs: that is how a confused or malicious agent is
// kept from claiming another node's addresses.
func (s *nodeService) ReportUsage(ctx context.Context, req *allotv1.ReportUsageRequest) (*allotv1.ReportUsageResponse, error) {
	id := req.GetInstanceId()
	if err := s.registered(ctx, id); err != nil {
		return nil, err
	}
	if err := s.checkOwned(ctx, id, req.GetAssigned(), req.GetFree()); err != nil {
		return nil, err
	}
	applied, err := s.st.PutUsage(ctx, store.Usage{
		InstanceID: id,
		Seq:        req.GetSeq(),
		Assigned:   slices.Clone(req.GetAssigned()),
		Free:       slices.Clone(req.GetFree()),
		Excess:     int(req.GetExcess()),
		HasExcess:  req.Excess != nil,
		UpdatedAt:  s.now(),
	})
	if err != nil {
		return nil, fmt.Errorf("report usage of %s: %w", id, err)
	}
	if !applied {
		s.log.Debug("stale usage report ignored", "instance_id", id, "seq", req.GetSeq())
	}
	return &allotv1.ReportUsageResponse{}, nil
}

// checkOwned returns ErrNotOwner naming the first address that is not on
// one of the node's ENIs, and whose it is if anyone's.
//
// The hub's published state answers first, in the node's ENIs alone. It
// may be a little behind etcd, but the agent reports only addresses the
// broker listed to it, and every NodeEvent comes from that state, which
// never goes back. A RegisterResponse may have been read from etcd ahead
// of the hub (see nodeENIs), so whatever the hub's state lacks is checked
// again in etcd before it is refused. The hub may still list an address
// etcd has just taken away; so could the etcd read, since PutUsage does not
// compare the ENIs, and whoever reads a usage report counts only addresses
// still on the node's ENIs.
func (s *nodeService) checkOwned(ctx context.Context, id string, lists ...[]string) error {
	if ns, live := s.hub.node(id); live && ns != nil && ownsAll(ns.enis, lists) {
		return nil
	}
	own, err := s.ownENIs(ctx, id)
	if err != nil {
		return fmt.Errorf("report usage of %s: list enis: %w", id, err)
	}
	ix := newAddrIndex(own)
	for _, list := range lists {
		for _, a := range list {
			if _, ok := ix.owner(a); ok {
				continue
			}
			all, err := s.st.ListENIs(ctx)
			if err != nil {
				return fmt.Errorf("report usage of %s: list enis: %w", id, err)
			}
			if e, ok := newAddrIndex(all).owner(a); ok {
				return fmt.Errorf("address %s is on %s of node %s, not on node %s: %w", a, e.ID, e.InstanceID, id, rpcerr.ErrNotOwner)
			}
			return fmt.Errorf("address %s is on none of node %s's ENIs in the broker's records: %w", a, id, rpcerr.ErrNotOwner)
		}
	}
	return nil
}

// ownsAll reports whether every address of lists is on one of enis.
func ownsAll(enis []store.ENI, lists [][]string) bool {
	ix := newAddrIndex(enis)
	for _, list := range lists {
		for _, a := range list {
			if _, ok := ix.owner(a); !ok {
				return false
			}
		}
	}
	return true
}

// SetDemand records the node's latest demand; the leader's planner reads it.
func (s *nodeService) SetDemand(ctx context.Context, req *allotv1.SetDemandRequest) (*allotv1.SetDemandResponse, error) {
	id := req.GetInstanceId()
	if err := s.registered(ctx, id); err != nil {
		return nil, err
	}
	d := store.Demand{
		InstanceID:    id,
		Pending:       int(req.GetPending()),
		WarmShortfall: int(req.GetWarmShortfall()),
		Known:         int(req.GetKnown()),
		HasKnown:      req.Known != nil,
		UpdatedAt:     s.now(),
		Trace:         traceparent(ctx),
	}
	if err := s.demands.put(ctx, d); err != nil {
		return nil, fmt.Errorf("set demand of %s: %w", id, err)
	}
	return &allotv1.SetDemandResponse{}, nil
}

// WatchNode sends the node's full state now and again after every change
// that alters it. The hub computes a node's snapshot once per batch of
// store changes that touched the node, whoever watches, and a stream that
// falls behind skips straight to the latest.
func (s *nodeService) WatchNode(req *allotv1.WatchNodeRequest, stream allotv1.NodeService_WatchNodeServer) error {
	ctx := stream.Context()
	id := req.GetInstanceId()
	if err := s.registered(ctx, id); err != nil {
		return err
	}
	sub, err := s.hub.subscribeNode(ctx, id)
	if err != nil {
		return err
	}
	var last *allotv1.NodeEvent
	for {
		ns, rev, err := sub.next(ctx)
		if err != nil {
			return err
		}
		ev := emptyNodeEvent
		if ns != nil {
			ev = ns.ev
		}
		// The hub replaces a node's state only when its event changes, but
		// a node whose records all went and came back may repeat itself.
		if last != nil && proto.Equal(ev, last) {
			continue
		}
		last = ev
		out := proto.CloneOf(ev)
		out.Revision = rev
		if err := stream.Send(out); err != nil {
			return err
		}
	}
}

// emptyNodeEvent is the event of a node the broker holds nothing of.
var emptyNodeEvent = nodeEvent(store.Node{}, nil, nil, store.NodeStatus{}, nil)

// AckRelease records the agent's consent to give back (part of) a release
// proposal. The store refuses another node's release (ErrNotOwner) and
// addresses that were not proposed (ErrInvalid).
func (s *nodeService) AckRelease(ctx context.Context, req *allotv1.AckReleaseRequest) (*allotv1.AckReleaseResponse, error) {
	r, err := s.st.AckRelease(ctx, req.GetInstanceId(), req.GetReleaseId(), req.GetAddresses(), req.GetPrefixes())
	if err != nil {
		return nil, fmt.Errorf("acknowledge release %s for %s: %w", req.GetReleaseId(), req.GetInstanceId(), err)
	}
	s.log.Info("release acknowledged", "instance_id", req.GetInstanceId(), "release_id", r.ID,
		"addresses", len(req.GetAddresses()), "prefixes", len(req.GetPrefixes()))
	return &allotv1.AckReleaseResponse{}, nil
}

// Heartbeat refreshes the node's liveness. It is the most frequent call,
// so it reads nothing first: the store writes the node's alive key only at
// its first heartbeat here (refusing an unregistered node then), and later
// ones cost etcd nothing.
func (s *nodeService) Heartbeat(ctx context.Context, req *allotv1.HeartbeatRequest) (*allotv1.HeartbeatResponse, error) {
	id := req.GetInstanceId()
	if err := s.st.KeepAlive(ctx, id, s.nodeTTL); err != nil {
		return nil, fmt.Errorf("heartbeat of %s: %w", id, err)
	}
	return &allotv1.HeartbeatResponse{}, nil
}

// registered returns NotFound for a node that never registered, with what
// to do about it.
//
// The hub's state answers when it lists the node. It may be a moment
// behind a deletion; PutUsage and PutDemand check the node in their own
// transaction all the same.
func (s *nodeService) registered(ctx context.Context, id string) error {
	if ns, live := s.hub.node(id); live && ns != nil && ns.registered {
		return nil
	}
	if _, err := s.st.GetNode(ctx, id); err != nil {
		if isNotFound(err) {
			return fmt.Errorf("node %s is not registered; call Register first: %w", id, rpcerr.ErrNotFound)
		}
		return fmt.Errorf("look up node %s: %w", id, err)
	}
	return nil
}

// traceparent is the W3C trace context of ctx's span, or "".
func traceparent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c.Get("traceparent")
}
