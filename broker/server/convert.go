package server

import (
	"slices"

	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"google.golang.org/protobuf/proto"
)

// eniProto converts an ENI record; cidrs maps subnet IDs to CIDRs.
func eniProto(e store.ENI, cidrs map[string]string) *allotv1.ENI {
	return &allotv1.ENI{
		EniId:       e.ID,
		Mac:         e.MAC,
		DeviceIndex: int32(e.DeviceIndex),
		SubnetId:    e.SubnetID,
		SubnetCidr:  cidrs[e.SubnetID],
		PrimaryIp:   e.PrimaryIP,
		Addresses:   slices.Clone(e.Addresses),
		Prefixes:    slices.Clone(e.Prefixes),
		Primary:     e.Primary,
	}
}

func enisProto(es []store.ENI, cidrs map[string]string) []*allotv1.ENI {
	out := make([]*allotv1.ENI, 0, len(es))
	for _, e := range es {
		out = append(out, eniProto(e, cidrs))
	}
	return out
}

// nodeEvent is the snapshot WatchNode sends for one node (without its
// revision, so two snapshots of the same state compare equal): the node's
// ENIs sorted by ID, its limits, its open (proposed or acknowledged)
// releases oldest first, and why its demand is unmet if it is.
func nodeEvent(n store.Node, enis []store.ENI, open []store.Release, st store.NodeStatus, cidrs map[string]string) *allotv1.NodeEvent {
	ev := &allotv1.NodeEvent{
		Enis:          enisProto(enis, cidrs),
		MaxEnis:       int32(n.MaxENIs),
		Ipv4PerEni:    int32(n.IPv4PerENI),
		ReleaseStates: true,
		Unmet:         unmetProto(st),
	}
	for _, r := range open {
		state := allotv1.ReleaseState_RELEASE_STATE_PROPOSED
		if r.State == store.ReleaseAcked {
			state = allotv1.ReleaseState_RELEASE_STATE_ACKED
		}
		ev.Releases = append(ev.Releases, &allotv1.ReleaseProposal{
			ReleaseId: r.ID,
			Addresses: slices.Clone(r.Addresses),
			Prefixes:  slices.Clone(r.Prefixes),
			State:     state,
		})
	}
	return ev
}

// unmetProto converts a node's status record; nil when there is none.
func unmetProto(st store.NodeStatus) *allotv1.UnmetStatus {
	if st.Reason == "" {
		return nil
	}
	return &allotv1.UnmetStatus{Reason: st.Reason, Message: st.Message, SinceUnixMs: st.Since.UnixMilli()}
}

// budgets computes every subnet's figures from a view.
func budgets(v *view) []*allotv1.SubnetBudget {
	out := make([]*allotv1.SubnetBudget, 0, len(v.subnets))
	nodes, closed := v.podNodes()
	for _, sn := range v.subnets {
		b := Figures(sn, nodes, v.enis, v.usage, closed)
		b.Revision = v.rev
		out = append(out, b)
	}
	return out
}

// sameBudget compares two budgets ignoring the revision they were read at.
func sameBudget(a, b *allotv1.SubnetBudget) bool {
	if a == nil || b == nil {
		return a == b
	}
	ac, bc := proto.CloneOf(a), proto.CloneOf(b)
	ac.Revision, bc.Revision = 0, 0
	return proto.Equal(ac, bc)
}

// modeName converts the wire mode to the record's; unspecified means
// secondary IPs.
func modeName(m allotv1.AddressMode) string {
	if m == allotv1.AddressMode_ADDRESS_MODE_PREFIX {
		return store.ModePrefix
	}
	return store.ModeSecondaryIP
}
