// Package planner turns node demands into the EC2 calls that satisfy them:
// the fewest calls, or (Policy TimeOptimal) the mix of filling existing ENIs
// and creating new ones that EC2's token buckets send soonest. It is pure:
// no I/O, no clock, no randomness. The executor carries a Plan out; tests
// check plans without EC2.
package planner

import allotv1 "github.com/allotnet/allot/proto/allot/v1"

// Mode says how a node's pods get addresses.
type Mode int

const (
	// SecondaryIP gives each pod one secondary IPv4 address of an ENI.
	SecondaryIP Mode = iota + 1
	// Prefix gives pods addresses from /28 prefixes delegated to ENIs; one
	// prefix takes one address slot of the ENI and yields 16 addresses.
	Prefix
)

// Limits are an instance type's ENI limits, as DescribeInstanceTypes gives
// them.
type Limits struct {
	// MaxENIs is the most network interfaces the instance can have attached,
	// the primary included.
	MaxENIs int
	// IPv4PerENI is the address slots of one ENI, its primary address
	// included.
	IPv4PerENI int
	// PrefixCapable is true for Nitro types, which accept /28 prefixes.
	PrefixCapable bool
}

// ENI is one interface already attached to (or being attached to) a node.
type ENI struct {
	ID          string
	DeviceIndex int
	SubnetID    string
	// Primary marks device index 0, which allot may fill but never creates,
	// detaches or deletes.
	Primary bool
	// Secondary is the number of secondary IPv4 addresses it holds.
	Secondary int
	// Prefixes is the number of /28 prefixes delegated to it.
	Prefixes int
	// Closed marks an ENI the node's mode can't add to now (its subnet has
	// no free /28 for a prefix-mode node): it keeps its device index and
	// counts against the ENI limit, but is planned nothing.
	Closed bool
}

// Slots returns the address slots the ENI has used: its primary address, its
// secondary addresses and one per prefix.
func (e ENI) Slots() int { return 1 + e.Secondary + e.Prefixes }

// Node is one node's demand together with what it has.
type Node struct {
	InstanceID string
	// SubnetID is the node's own subnet: where its new ENIs go when
	// Subnets is empty.
	SubnetID string
	// Subnets are the subnets the node's new ENIs may use (its pod
	// network's, in its zone); each new ENI goes to the one with the most
	// budget left when its first slot is granted.
	Subnets        []string
	SecurityGroups []string
	Mode           Mode
	Limits         Limits
	// MaxENIs caps the node below Limits.MaxENIs when positive.
	MaxENIs int
	ENIs    []ENI
	// Pending is the number of pod ADDs waiting for an address now. They are
	// served before any warm target.
	Pending int
	// WarmShortfall is how many more free addresses the node's warm targets
	// ask for, beyond Pending.
	WarmShortfall int
	// InFlight is addresses already on their way to the node (EC2 calls
	// planned or sent but not yet recorded); they count against the demand.
	InFlight int
	// FillNewENIs has a new ENI in secondary-IP mode created with every
	// address it can take, not only the ones the demand asks for, as far as
	// the subnet budget allows after every node's demand is served (as
	// aws-vpc-cni does under WARM_ENI_TARGET: the addresses come free with
	// the CreateNetworkInterface call, while adding them later costs an
	// AssignPrivateIpAddresses each time). For nodes whose warm targets
	// count ENIs, not addresses.
	FillNewENIs bool
	// Busy is true while an EC2 call that changes this node's ENI set (a
	// create or attach) is in flight; the planner then plans no new ENI for
	// it, so device indexes can't collide.
	Busy bool
}

// Kind is the EC2 call an Action stands for.
type Kind int

const (
	// Assign is one AssignPrivateIpAddresses on an existing ENI.
	Assign Kind = iota + 1
	// CreateAttach is CreateNetworkInterface (pre-filled, tagged), then
	// AttachNetworkInterface at DeviceIndex, then
	// ModifyNetworkInterfaceAttribute for DeleteOnTermination: three calls.
	CreateAttach
)

func (k Kind) String() string {
	switch k {
	case Assign:
		return "assign"
	case CreateAttach:
		return "create-attach"
	}
	return "unknown"
}

// Action is one step of a plan.
type Action struct {
	Kind       Kind
	InstanceID string
	// ENIID is the ENI to fill, for Assign.
	ENIID    string
	SubnetID string
	// SecurityGroups are the groups for a new ENI (the node's).
	SecurityGroups []string
	// DeviceIndex is the lowest free index, for CreateAttach.
	DeviceIndex int
	// Count is the number of secondary addresses (Mode SecondaryIP) or
	// prefixes (Mode Prefix) to add.
	Count int
	Mode  Mode
	// Urgent is true when the action serves pods waiting now.
	Urgent bool
}

// Addresses returns how many pod addresses the action yields.
func (a Action) Addresses() int {
	if a.Mode == Prefix {
		return a.Count * allotv1.PrefixSize
	}
	return a.Count
}

// Cost returns how many subnet addresses the action consumes: the yielded
// addresses plus, for a new ENI, its own primary address.
func (a Action) Cost() int64 {
	c := int64(a.Addresses())
	if a.Kind == CreateAttach {
		c++
	}
	return c
}

// Calls returns the number of EC2 API calls the action costs.
func (a Action) Calls() int {
	if a.Kind == CreateAttach {
		return 3
	}
	return 1
}

// Plan is the planner's answer.
type Plan struct {
	Actions []Action
	// Unmet is, per instance, demand the plan could not cover and why.
	Unmet map[string]Shortfall
}

// Reason says why demand went unmet.
type Reason int

const (
	// NodeFull means the node has no ENI slot and no address slot left.
	NodeFull Reason = iota + 1
	// BudgetExhausted means the subnet's budget has no room.
	BudgetExhausted
	// NodeBusy means a create/attach for the node is still in flight.
	NodeBusy
)

// Shortfall is demand left unmet for one node.
type Shortfall struct {
	Addresses int
	Reason    Reason
}

// Budgets maps a subnet ID to the addresses the cluster may still add there
// (SubnetBudget.available). A subnet missing from the map has no room.
type Budgets map[string]int64
