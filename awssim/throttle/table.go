// Package throttle models EC2's request throttling: one token bucket per
// action or per class of actions for the whole simulated account. A request
// takes one token; an empty bucket refuses it and the server answers
// RequestLimitExceeded. Refill runs on simulated time, so a time scale speeds
// every bucket up by the same factor.
package throttle

// Spec is one bucket's size and refill rate (tokens per simulated second).
type Spec struct {
	Capacity float64 `json:"capacity"`
	Refill   float64 `json:"refill"`
}

// Bucket names for the classes of actions that share one of EC2's buckets
// (docs/architecture.md, "EC2's limits"). Actions not in a class have a
// bucket named after the action.
const (
	// ClassMutating is shared by AttachNetworkInterface and DetachNetworkInterface.
	ClassMutating = "mutating"
	// ClassDescribe is the non-mutating class: Describe* calls with a filter,
	// IDs or pagination, and every DescribeSubnets/DescribeInstanceTypes call.
	ClassDescribe = "describe"
	// ClassDescribeUnfiltered is DescribeInstances and DescribeNetworkInterfaces
	// with neither filter, IDs nor pagination: the expensive full listing.
	ClassDescribeUnfiltered = "describe-unfiltered"
)

// DefaultSpecs returns EC2's bucket table (docs/architecture.md, "EC2's
// limits"), keyed by bucket name.
func DefaultSpecs() map[string]Spec {
	perAction := Spec{Capacity: 100, Refill: 5}
	return map[string]Spec{
		"CreateNetworkInterface":          perAction,
		"AssignPrivateIpAddresses":        perAction,
		"UnassignPrivateIpAddresses":      perAction,
		"DeleteNetworkInterface":          perAction,
		"ModifyNetworkInterfaceAttribute": perAction,
		"CreateTags":                      {Capacity: 100, Refill: 10},
		// DeleteTags is not in the table; EC2 treats it like CreateTags.
		"DeleteTags":            {Capacity: 100, Refill: 10},
		ClassMutating:           {Capacity: 50, Refill: 5},
		ClassDescribe:           {Capacity: 100, Refill: 20},
		ClassDescribeUnfiltered: {Capacity: 50, Refill: 10},
	}
}

// Bucket returns the bucket an action's request draws from. narrowed says
// whether a Describe request carried a filter, IDs, MaxResults or NextToken.
// ok is false for actions the table does not cover (they are not throttled).
func Bucket(action string, narrowed bool) (name string, ok bool) {
	switch action {
	case "CreateNetworkInterface", "AssignPrivateIpAddresses", "UnassignPrivateIpAddresses",
		"DeleteNetworkInterface", "ModifyNetworkInterfaceAttribute", "CreateTags", "DeleteTags":
		return action, true
	case "AttachNetworkInterface", "DetachNetworkInterface":
		return ClassMutating, true
	case "DescribeInstances", "DescribeNetworkInterfaces":
		if narrowed {
			return ClassDescribe, true
		}
		return ClassDescribeUnfiltered, true
	case "DescribeSubnets", "DescribeInstanceTypes", "DescribeVpcs", "DescribeSecurityGroups":
		return ClassDescribe, true
	}
	return "", false
}
