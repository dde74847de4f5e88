// Package store keeps all of the broker's state in etcd under a versioned
// prefix. Every value is a JSON record with a schema version; every change is
// a transaction that compares revisions, so two brokers (or a broker and a
// restarted one) can never both win. Nothing that matters lives only in
// memory. docs/etcd.md documents the layout.
package store

import (
	"strings"
	"time"
)

// SchemaVersion is written into every record as "v". A record with another
// version is reported as corrupt, never guessed at.
const SchemaVersion = 1

// Subnet is one subnet's budget and accounting.
type Subnet struct {
	V                int    `json:"v"`
	ID               string `json:"id"`
	CIDR             string `json:"cidr"`
	AvailabilityZone string `json:"az"`
	VPCID            string `json:"vpc_id"`
	// Usable is the CIDR's size minus the 5 addresses AWS reserves.
	Usable int64 `json:"usable"`
	// Headroom is kept free for others in the account.
	Headroom int64 `json:"headroom"`
	// Cap is an optional ceiling for this cluster; 0 means none.
	Cap int64 `json:"cap"`
	// UsedByOthers is addresses in use outside the cluster, from the last
	// DescribeSubnets (usable - available - Attached).
	UsedByOthers int64 `json:"used_by_others"`
	// Attached counts every address on the cluster's (non-primary) ENIs:
	// ENI primaries, secondary addresses and 16 per prefix.
	Attached int64 `json:"attached"`
	// Reserved counts addresses taken by open intents.
	Reserved int64 `json:"reserved"`
	// NoPrefixUntil is set when EC2 could not carve a /28 out of the
	// subnet (InsufficientCidrBlocks: its free addresses are scattered):
	// until then prefix-mode nodes get secondary addresses here.
	// NoPrefixReason is EC2's answer.
	NoPrefixUntil  time.Time `json:"no_prefix_until,omitzero"`
	NoPrefixReason string    `json:"no_prefix_reason,omitempty"`
	// Rev is the etcd mod revision the record was read at (not stored).
	Rev int64 `json:"-"`
}

// Limit returns the most this cluster may hold in the subnet.
func (s Subnet) Limit() int64 {
	l := s.Usable - s.Headroom - s.UsedByOthers
	if s.Cap > 0 && s.Cap < l {
		l = s.Cap
	}
	if l < 0 {
		l = 0
	}
	return l
}

// NoPrefix reports whether prefix-mode nodes get secondary addresses in the
// subnet at now, EC2 having found no free /28 in it lately.
func (s Subnet) NoPrefix(now time.Time) bool { return now.Before(s.NoPrefixUntil) }

// Available returns what the cluster can still add: Limit - Attached -
// Reserved, never negative.
func (s Subnet) Available() int64 {
	a := s.Limit() - s.Attached - s.Reserved
	if a < 0 {
		return 0
	}
	return a
}

// Node is one registered node.
type Node struct {
	V                int      `json:"v"`
	InstanceID       string   `json:"instance_id"`
	InstanceType     string   `json:"instance_type"`
	AvailabilityZone string   `json:"az"`
	VPCID            string   `json:"vpc_id"`
	SubnetID         string   `json:"subnet_id"`
	PrimaryENIID     string   `json:"primary_eni_id"`
	PrimaryIP        string   `json:"primary_ip"`
	SecurityGroups   []string `json:"security_groups"`
	// NodeName is the Kubernetes node name the agent registered with, for
	// people to read; empty when it gave none (and in records written
	// before it existed).
	NodeName string `json:"node_name,omitempty"`
	// Tags are the instance's tags as EC2 reported them at registration;
	// pod network selectors match on them.
	Tags map[string]string `json:"tags,omitempty"`
	// Mode is ModeSecondaryIP or ModePrefix.
	Mode string `json:"mode"`
	// MaxENIs is the instance type's limit, capped by the agent's setting.
	MaxENIs    int `json:"max_enis"`
	IPv4PerENI int `json:"ipv4_per_eni"`
	// Warm targets, as the agent registered them.
	WarmIPTarget     int       `json:"warm_ip_target"`
	MinimumIPTarget  int       `json:"minimum_ip_target"`
	WarmENITarget    int       `json:"warm_eni_target"`
	WarmPrefixTarget int       `json:"warm_prefix_target"`
	RegisteredAt     time.Time `json:"registered_at"`
	Rev              int64     `json:"-"`
}

// The node's address modes, as agents state them.
const (
	ModeSecondaryIP = "secondary-ip"
	ModePrefix      = "prefix"
)

// PrefixMode reports whether the node's pods get addresses from /28
// prefixes (ModePrefix, in any case); anything else is secondary IPs.
//
// A round asks it of every node. Decoded records hold the constants
// themselves (canon), so for them it compares lengths and pointers and
// never reads the mode's bytes, which a record decoded alone keeps
// wherever its decode put them.
func (n Node) PrefixMode() bool {
	switch n.Mode {
	case ModePrefix:
		return true
	case ModeSecondaryIP:
		return false
	}
	return strings.EqualFold(n.Mode, ModePrefix)
}

// Demand is a node's latest stated demand. Kept apart from Node so the hot
// demand updates don't conflict with registration.
type Demand struct {
	V             int    `json:"v"`
	InstanceID    string `json:"instance_id"`
	Pending       int    `json:"pending"`
	WarmShortfall int    `json:"warm_shortfall"`
	// Known, when HasKnown, is the address slots the agent's demand was
	// computed against (SetDemandRequest.known): the broker takes what its
	// records hold beyond it off the demand as already on its way.
	Known     int       `json:"known,omitempty"`
	HasKnown  bool      `json:"has_known,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	// Trace is the W3C traceparent of the call that stated the demand, so
	// the EC2 actions that answer it can link to it; empty when untraced.
	Trace string `json:"trace,omitempty"`
	Rev   int64  `json:"-"`
}

// Usage is a node's latest batch report of which addresses pods hold.
type Usage struct {
	V          int      `json:"v"`
	InstanceID string   `json:"instance_id"`
	Seq        uint64   `json:"seq"`
	Assigned   []string `json:"assigned"`
	Free       []string `json:"free"`
	// Excess, when HasExcess, is how many of Free the node's warm targets
	// do not need, as the agent states it (ReportUsageRequest.excess).
	// Without it the broker proposes no release.
	Excess    int       `json:"excess,omitempty"`
	HasExcess bool      `json:"has_excess,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	Rev       int64     `json:"-"`
}

// ENI statuses as the broker records them.
const (
	ENICreated  = "created"  // exists in EC2, not yet attached
	ENIAttached = "attached" // attached to InstanceID
	ENIDetached = "detached" // detach requested or done; to be deleted
)

// ENI is an interface the broker created, or a node's primary ENI (Primary).
type ENI struct {
	V           int       `json:"v"`
	ID          string    `json:"id"`
	InstanceID  string    `json:"instance_id"`
	SubnetID    string    `json:"subnet_id"`
	MAC         string    `json:"mac"`
	DeviceIndex int       `json:"device_index"`
	PrimaryIP   string    `json:"primary_ip"`
	Addresses   []string  `json:"addresses"`
	Prefixes    []string  `json:"prefixes"`
	Primary     bool      `json:"primary"`
	Status      string    `json:"status"`
	ClientToken string    `json:"client_token,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	Rev         int64     `json:"-"`
}

// Intent kinds: one per mutating EC2 call.
const (
	IntentCreate   = "create"   // CreateNetworkInterface
	IntentAttach   = "attach"   // AttachNetworkInterface
	IntentModify   = "modify"   // ModifyNetworkInterfaceAttribute
	IntentAssign   = "assign"   // AssignPrivateIpAddresses
	IntentUnassign = "unassign" // UnassignPrivateIpAddresses
	IntentDetach   = "detach"   // DetachNetworkInterface
	IntentDelete   = "delete"   // DeleteNetworkInterface
)

// Intent states.
const (
	IntentOpen   = "open"
	IntentDone   = "done"
	IntentFailed = "failed"
)

// Intent records a mutating EC2 call before it is sent. Its reservation (if
// any) was taken from the subnet in the same transaction that wrote it.
type Intent struct {
	V           int    `json:"v"`
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	State       string `json:"state"`
	InstanceID  string `json:"instance_id"`
	ENIID       string `json:"eni_id,omitempty"`
	SubnetID    string `json:"subnet_id"`
	ClientToken string `json:"client_token,omitempty"`
	DeviceIndex int    `json:"device_index,omitempty"`
	// Count is secondary addresses or prefixes, per Prefix.
	Count  int  `json:"count,omitempty"`
	Prefix bool `json:"prefix,omitempty"`
	// SecurityGroups are a create's groups (its pod network's, which may
	// not be the node's), so a new leader repeats the very same request.
	SecurityGroups []string `json:"security_groups,omitempty"`
	// Addresses/Prefixes name what an unassign gives back.
	Addresses []string `json:"addresses,omitempty"`
	Prefixes  []string `json:"prefixes,omitempty"`
	// Reserved is how many subnet addresses the intent holds.
	Reserved  int64     `json:"reserved"`
	Urgent    bool      `json:"urgent,omitempty"`
	ReleaseID string    `json:"release_id,omitempty"`
	Error     string    `json:"error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// FinishedAt is when the intent became done or failed.
	FinishedAt time.Time `json:"finished_at,omitzero"`
	Rev        int64     `json:"-"`
}

// Release states: proposed to the agent, acknowledged by it, carried out.
const (
	ReleaseProposed = "proposed"
	ReleaseAcked    = "acked"
	ReleaseDone     = "done"
)

// Release is the handshake that takes free addresses back from a node.
// Nothing is unassigned unless Acked lists it.
type Release struct {
	V          int       `json:"v"`
	ID         string    `json:"id"`
	InstanceID string    `json:"instance_id"`
	ENIID      string    `json:"eni_id"`
	State      string    `json:"state"`
	Addresses  []string  `json:"addresses,omitempty"`
	Prefixes   []string  `json:"prefixes,omitempty"`
	AckedAddrs []string  `json:"acked_addresses,omitempty"`
	AckedPfx   []string  `json:"acked_prefixes,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	Rev        int64     `json:"-"`
}
