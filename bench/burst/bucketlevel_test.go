package burst

import (
	"testing"
	"time"
)

func TestBrokerBucketsFull(t *testing.T) {
	half := map[string]BucketLevel{
		"AssignPrivateIpAddresses": {Tokens: 49, Size: 49, Refill: 5},
		"AttachNetworkInterface":   {Tokens: 11.5, Size: 24, Refill: 5},
	}
	if bucketsFull(half) {
		t.Errorf("bucketsFull(%v) = true with Attach at 11.5 of 24", half)
	}
	if got, want := fillTime(half), time.Duration(49/5.0*float64(time.Second)); got != want {
		t.Errorf("fillTime = %v, want %v (the slowest bucket from empty)", got, want)
	}
	half["AttachNetworkInterface"] = BucketLevel{Tokens: 24, Size: 24, Refill: 5}
	if !bucketsFull(half) {
		t.Errorf("bucketsFull(%v) = false with every bucket at its size", half)
	}
}
