package throttle

import (
	"testing"
	"time"

	"github.com/allotnet/allot/awssim/simclock"
)

func TestBurstThenRefill(t *testing.T) {
	clk := simclock.NewManual(time.Unix(0, 0))
	l := New(clk, nil)
	for i := range 50 {
		if !l.Take(ClassMutating) {
			t.Fatalf("request %d of the 50-token burst refused", i+1)
		}
	}
	if l.Take(ClassMutating) {
		t.Fatal("51st request in the same instant allowed; want refused")
	}
	clk.Advance(time.Second) // refill 5/s
	got := 0
	for l.Take(ClassMutating) {
		got++
	}
	if got != 5 {
		t.Fatalf("after 1 s: %d tokens, want 5", got)
	}
	clk.Advance(time.Hour)
	if tok := l.Tokens(ClassMutating); tok != 50 {
		t.Fatalf("after an hour: %v tokens, want capacity 50", tok)
	}
}

func TestBucketsAreIndependent(t *testing.T) {
	clk := simclock.NewManual(time.Unix(0, 0))
	l := New(clk, nil)
	for l.Take("CreateTags") {
	}
	if !l.Take("CreateNetworkInterface") || !l.Take(ClassMutating) || !l.Take(ClassDescribe) {
		t.Fatal("draining CreateTags affected another bucket")
	}
}

func TestBucketTable(t *testing.T) {
	cases := []struct {
		action   string
		narrowed bool
		want     string
	}{
		{"AttachNetworkInterface", false, ClassMutating},
		{"DetachNetworkInterface", true, ClassMutating},
		{"DescribeNetworkInterfaces", false, ClassDescribeUnfiltered},
		{"DescribeNetworkInterfaces", true, ClassDescribe},
		{"DescribeInstances", false, ClassDescribeUnfiltered},
		{"DescribeSubnets", false, ClassDescribe},
		{"CreateTags", false, "CreateTags"},
		{"AssignPrivateIpAddresses", false, "AssignPrivateIpAddresses"},
	}
	specs := DefaultSpecs()
	for _, c := range cases {
		got, ok := Bucket(c.action, c.narrowed)
		if !ok || got != c.want {
			t.Errorf("Bucket(%s, %v) = %q, %v; want %q", c.action, c.narrowed, got, ok, c.want)
		}
		if _, ok := specs[got]; !ok {
			t.Errorf("bucket %q has no spec", got)
		}
	}
	if _, ok := Bucket("RunInstances", false); ok {
		t.Error("RunInstances has a bucket; want none")
	}
	if s := specs["CreateTags"]; s.Capacity != 100 || s.Refill != 10 {
		t.Errorf("CreateTags spec %+v", s)
	}
	if s := specs[ClassDescribeUnfiltered]; s.Capacity != 50 || s.Refill != 10 {
		t.Errorf("unfiltered spec %+v", s)
	}
}
