// Package ratelimit keeps client-side token buckets that mirror EC2's request
// throttling (docs/architecture.md, "EC2's limits"), so the broker never
// sends a call EC2 has no token for. A share below 1 leaves room for other
// tools in the same account; a time scale above 1 speeds refill up for
// simulations, exactly as awssim does.
package ratelimit

import (
	"math"
	"strings"
)

// Class names one EC2 token bucket. Most mutating actions have a bucket of
// their own; AttachNetworkInterface and DetachNetworkInterface share one, and
// Describe calls land in one of two buckets depending on whether they filter
// or paginate.
type Class string

// The bucket classes the broker uses.
const (
	CreateNetworkInterface          Class = "CreateNetworkInterface"
	AssignPrivateIPAddresses        Class = "AssignPrivateIpAddresses"
	UnassignPrivateIPAddresses      Class = "UnassignPrivateIpAddresses"
	DeleteNetworkInterface          Class = "DeleteNetworkInterface"
	ModifyNetworkInterfaceAttribute Class = "ModifyNetworkInterfaceAttribute"
	CreateTags                      Class = "CreateTags"
	// Mutating is the bucket AttachNetworkInterface and
	// DetachNetworkInterface share.
	Mutating Class = "Mutating"
	// Describe is every Describe* call that filters or paginates.
	Describe Class = "Describe"
	// DescribeUnfiltered is DescribeInstances and DescribeNetworkInterfaces
	// with neither a filter nor pagination.
	DescribeUnfiltered Class = "DescribeUnfiltered"
)

// ClassOf returns the bucket an EC2 action draws from. filtered says whether a
// Describe call carries a filter or pagination (MaxResults/NextToken); it is
// ignored for other actions. An action EC2 gives no listed bucket to gets a
// class of its own name, with the default mutating bucket (see BucketOf).
func ClassOf(action string, filtered bool) Class {
	switch action {
	case "AttachNetworkInterface", "DetachNetworkInterface":
		return Mutating
	case "DescribeInstances", "DescribeNetworkInterfaces":
		if filtered {
			return Describe
		}
		return DescribeUnfiltered
	}
	if strings.HasPrefix(action, "Describe") {
		// Only the two above have an unfiltered bucket of their own.
		return Describe
	}
	return Class(action)
}

// Bucket is one token bucket: Size tokens when full, refilled at Refill
// tokens per second.
type Bucket struct {
	Size   int
	Refill float64
}

// defaultBucket is what EC2 documents for mutating actions it lists no
// special bucket for.
var defaultBucket = Bucket{Size: 100, Refill: 5}

// ec2Buckets are EC2's per-account, per-region buckets (docs/architecture.md,
// "EC2's limits").
var ec2Buckets = map[Class]Bucket{
	CreateNetworkInterface:          {Size: 100, Refill: 5},
	AssignPrivateIPAddresses:        {Size: 100, Refill: 5},
	UnassignPrivateIPAddresses:      {Size: 100, Refill: 5},
	DeleteNetworkInterface:          {Size: 100, Refill: 5},
	ModifyNetworkInterfaceAttribute: {Size: 100, Refill: 5},
	CreateTags:                      {Size: 100, Refill: 10},
	Mutating:                        {Size: 50, Refill: 5},
	Describe:                        {Size: 100, Refill: 20},
	DescribeUnfiltered:              {Size: 50, Refill: 10},
}

// BucketOf returns EC2's own bucket for a class, unscaled.
func BucketOf(c Class) Bucket {
	if b, ok := ec2Buckets[c]; ok {
		return b
	}
	return defaultBucket
}

// Scaled returns the bucket a client with the given share of the account's
// buckets may use, at the given time scale: the size is floor(Size*share) but
// at least 1, and refill is Refill*share*timeScale. Out-of-range share or
// timeScale values are treated as 1.
func (b Bucket) Scaled(share, timeScale float64) Bucket {
	share, timeScale = normalize(share, timeScale)
	size := int(math.Floor(float64(b.Size) * share))
	if size < 1 {
		size = 1
	}
	return Bucket{Size: size, Refill: b.Refill * share * timeScale}
}

func normalize(share, timeScale float64) (float64, float64) {
	if !(share > 0 && share <= 1) {
		share = 1
	}
	if !(timeScale > 0) || math.IsInf(timeScale, 0) {
		timeScale = 1
	}
	return share, timeScale
}
