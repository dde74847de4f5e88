package throttle

import (
	"fmt"
	"time"
)

// Semantics says how the account's buckets behave where EC2's documentation
// leaves room to model it two ways. The zero value is what EC2 documents:
// every API evaluated on its own ("each API is evaluated individually, and
// you are throttled on the number of requests you make on a per-API
// basis"), its bucket refilled continuously at its rate.
type Semantics struct {
	// SharedDescribe puts every narrowed Describe request (a filter, IDs
	// or pagination), DescribeSubnets and DescribeInstanceTypes into one
	// bucket, ClassDescribe, and the two unfiltered listings into one
	// bucket, ClassDescribeUnfiltered: the model before per-API buckets,
	// which makes unrelated describes compete. Off, each Describe action
	// has its own bucket (named after the action, with ClassDescribe's
	// spec) and its own unfiltered bucket (action + UnfilteredSuffix, with
	// ClassDescribeUnfiltered's spec).
	SharedDescribe bool `json:"sharedDescribe,omitempty"`
	// DiscreteRefill adds a bucket's refill once per whole simulated
	// second (counted from the limiter's start) instead of continuously:
	// EC2's documentation says tokens are "added every second". A client
	// pacing itself continuously at the same rate can run ahead of a
	// discrete bucket by up to one second's refill.
	DiscreteRefill bool `json:"discreteRefill,omitempty"`
}

// UnfilteredSuffix names a Describe action's unfiltered bucket when buckets
// are per API.
const UnfilteredSuffix = ":unfiltered"

// bucketFor returns the bucket an action's request draws from under sem,
// and the spec (a key of the table) it has. ok is false for actions the
// table does not cover (they are not throttled).
func (sem Semantics) bucketFor(action string, narrowed bool) (name, spec string, ok bool) {
	class, ok := Bucket(action, narrowed)
	if !ok || sem.SharedDescribe {
		return class, class, ok
	}
	switch class {
	case ClassDescribe:
		return action, class, true
	case ClassDescribeUnfiltered:
		return action + UnfilteredSuffix, class, true
	}
	return class, class, true
}

// refilled returns the tokens a bucket holding tokens at last holds at now,
// with epoch the limiter's start (discrete refill counts whole seconds from
// it) and rate the refill per second.
func (sem Semantics) refilled(tokens, capacity, rate float64, epoch, last, now time.Time) float64 {
	if !now.After(last) {
		return tokens
	}
	var add float64
	if sem.DiscreteRefill {
		ticks := int64(now.Sub(epoch)/time.Second) - int64(last.Sub(epoch)/time.Second)
		add = float64(ticks) * rate
	} else {
		add = now.Sub(last).Seconds() * rate
	}
	return min(capacity, tokens+add)
}

// ParseDescribe reads a describe-bucket model by name: "per-api" (EC2's)
// or "shared".
func ParseDescribe(s string) (shared bool, err error) {
	switch s {
	case "per-api", "":
		return false, nil
	case "shared":
		return true, nil
	}
	return false, fmt.Errorf("describe buckets %q: want per-api or shared", s)
}

// ParseRefill reads a refill model by name: "continuous" or "discrete".
func ParseRefill(s string) (discrete bool, err error) {
	switch s {
	case "continuous", "":
		return false, nil
	case "discrete":
		return true, nil
	}
	return false, fmt.Errorf("refill %q: want continuous or discrete", s)
}
