// Package hostnet is the agent's host-network layer: it finds ENI links by MAC
// and gives each secondary ENI its own route table, wires every pod with a
// veth pair, /32 routes, policy rules and a permanent neighbour entry, and
// keeps the node's SNAT for traffic leaving the VPC in an nftables table.
//
// The agent talks to it through the Network interface. Linux is the real
// implementation (netlink and nftables, against a node network namespace that
// need not be the caller's); Recorder touches no kernel and is what the burst
// benchmark runs.
package hostnet

import (
	"net/netip"
)

// Network is what the agent needs from the host network. Every method is
// idempotent: calling it again with the same arguments converges on the same
// state and reports success.
type Network interface {
	// SetupENI finds the ENI's link by MAC, brings it up and, for a secondary
	// ENI, fills its route table.
	SetupENI(ENIConfig) error
	// SetupPod wires one attachment: veth pair, pod address and routes,
	// neighbour entry, host route and policy rules.
	SetupPod(PodConfig) (PodResult, error)
	// TeardownPod removes what SetupPod added for this attachment and
	// nothing else. A missing pod namespace or veth is not an error.
	TeardownPod(PodConfig) error
	// CheckPod verifies every piece SetupPod adds; the error (a *CheckError)
	// names each missing or wrong piece.
	CheckPod(PodConfig) error
	// SetupSNAT rebuilds the node's SNAT for traffic leaving the VPC, or
	// removes it when SNATConfig.External is set.
	SetupSNAT(SNATConfig) error
	// Reconcile restores missing pieces of the desired pods and reports
	// devices and rules of ours that no desired pod accounts for. It removes
	// nothing: RemoveStray does, given the report.
	Reconcile(desired []PodConfig) (Report, error)
	// RemoveStray deletes the stray links, rules and routes of a report.
	RemoveStray(Report) error
	// ListPods lists the pods wired on the node, as found on the host.
	ListPods() ([]PodInfo, error)
}

// Attachment identifies one pod interface the way CNI does: network name,
// container ID and interface name. Everything the layer creates for a pod is
// named after it, never after the pod's name.
type Attachment struct {
	Network     string
	ContainerID string
	IfName      string
}

// ENIConfig describes one attached ENI.
type ENIConfig struct {
	// MAC is the ENI's MAC address, as IMDS reports it.
	MAC string
	// DeviceIndex is the attachment's device index; 0 is the primary ENI,
	// whose routes live in the main table and are left to the node.
	DeviceIndex int
	// PrimaryIP is the ENI's primary private address. Required for
	// secondary ENIs; when set on the primary ENI it is added if missing.
	PrimaryIP netip.Addr
	// Subnet is the ENI's subnet CIDR; the gateway is its first address + 1.
	Subnet netip.Prefix
	// MTU, when non-zero, is set on the link.
	MTU int
}

// PodConfig describes one attachment to wire.
type PodConfig struct {
	Attachment Attachment
	// NetNS is the path of the pod's network namespace.
	NetNS string
	// Address is the pod's IPv4 address (a secondary IP of an ENI, or an
	// address out of one of its prefixes).
	Address netip.Addr
	// DeviceIndex is the device index of the ENI that owns Address. Pods
	// on secondary ENIs get a rule sending their traffic to that ENI's table.
	DeviceIndex int
	// MTU, when non-zero, is set on both ends of the veth.
	MTU int
}

// PodResult is what SetupPod built, in the terms a CNI result needs.
type PodResult struct {
	HostVeth    string
	HostVethMAC string
	PodIfName   string
	PodMAC      string
	// Gateway is the pod's next hop, always PodGateway.
	Gateway netip.Addr
}

// SNATConfig describes the node's SNAT for traffic leaving the VPC.
type SNATConfig struct {
	// External means an external NAT (a NAT gateway) translates pod traffic:
	// the table and the routing rules are removed and pods leave through
	// their own ENI with their own address.
	External bool
	// PrimaryMAC picks the primary interface traffic is translated on.
	PrimaryMAC string
	// PrimaryIP is the node's primary address, the translated source.
	PrimaryIP netip.Addr
	// VPCCIDRs are never translated; traffic to them keeps the pod address.
	VPCCIDRs []netip.Prefix
	// ExcludeCIDRs are also left untranslated (peered networks, on-prem).
	ExcludeCIDRs []netip.Prefix
}

// PodInfo is one pod's wiring as found on the host.
type PodInfo struct {
	HostVeth    string
	HostVethMAC string
	// Attachment is read back from the veth's alias; zero if the alias is
	// missing or foreign.
	Attachment Attachment
	// Addresses are the /32 routes in the main table through the veth.
	Addresses []netip.Addr
	// Tables are the route tables the pod's source rules point at; empty
	// for pods on the primary ENI.
	Tables []int
}

// Report is what Reconcile found. Stray items are ours by name or priority
// but belong to no desired pod; nothing in a report has been deleted yet.
type Report struct {
	// Repaired lists desired pods that had missing pieces, now restored.
	Repaired []Repair
	// Failed lists desired pods that could not be checked or restored.
	Failed []PodFailure
	// NetNSGone lists desired pods whose namespace no longer exists; they
	// are left alone (the runtime will DEL them).
	NetNSGone   []Attachment
	StrayLinks  []StrayLink
	StrayRules  []StrayRule
	StrayRoutes []StrayRoute
}

// Empty reports whether the report found nothing at all.
func (r Report) Empty() bool {
	return len(r.Repaired) == 0 && len(r.Failed) == 0 && len(r.NetNSGone) == 0 &&
		len(r.StrayLinks) == 0 && len(r.StrayRules) == 0 && len(r.StrayRoutes) == 0
}

// Repair is one desired pod whose missing pieces were restored.
type Repair struct {
	Attachment Attachment
	Missing    []string
}

// PodFailure is one desired pod Reconcile could not restore.
type PodFailure struct {
	Attachment Attachment
	Err        string
}

// StrayLink is a host veth with our prefix that no desired pod owns.
type StrayLink struct {
	Name  string
	Index int
	// Attachment is read from the link's alias, when present.
	Attachment Attachment
}

// StrayRule is a policy rule at one of our per-pod priorities that no
// desired pod accounts for.
type StrayRule struct {
	Priority int
	// Src or Dst is set, as the rule selects on one of them.
	Src   netip.Prefix
	Dst   netip.Prefix
	Table int
}

// StrayRoute is a main-table /32 route through one of our veths that no
// desired pod accounts for.
type StrayRoute struct {
	Dst       netip.Addr
	LinkName  string
	LinkIndex int
}
