package ec2client

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestENILifecycle drives one ENI through everything the broker does with
// it, through the real SDK against awssim, checking what EC2 reports after
// each step.
func TestENILifecycle(t *testing.T) {
	sim := startSim(t, testScenario())
	c := newClient(t, sim, nil, 0)
	ctx := context.Background()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

	tags := OwnerTags("test-cluster", testInstance, now)
	e, err := c.CreateENI(ctx, CreateENIInput{
		SubnetID: testSubnet, SecondaryCount: 5, Description: "allot test",
		Tags: tags, ClientToken: "tok-lifecycle",
	})
	if err != nil {
		t.Fatalf("CreateENI: %v", err)
	}
	if e.ID == "" || e.MAC == "" || e.PrimaryIP == "" || e.Status != "available" || e.DeviceIndex != -1 {
		t.Errorf("created ENI = %+v, want ID, MAC, primary IP, available, not attached", e)
	}
	if len(e.Addresses) != 5 || slices.Contains(e.Addresses, e.PrimaryIP) {
		t.Errorf("addresses %v (primary %s), want 5 secondaries", e.Addresses, e.PrimaryIP)
	}
	if !reflect.DeepEqual(e.Tags, tags) {
		t.Errorf("tags %v, want %v", e.Tags, tags)
	}
	if e.Tags[TagCreatedAt] != "2025-03-01T12:00:00Z" || e.Tags[TagOwner] != OwnerValue {
		t.Errorf("owner tags wrong: %v", e.Tags)
	}
	if e.SubnetID != testSubnet || e.AZ != "us-east-1a" || e.Description != "allot test" || e.VPCID == "" {
		t.Errorf("created ENI placement = %+v", e)
	}
	// EC2's own record agrees.
	if w, ok := sim.World().NetworkInterface(e.ID); !ok || !reflect.DeepEqual(w.Tags, tags) || len(w.SecondaryIPs) != 5 {
		t.Errorf("awssim's ENI = %+v (found %v)", w, ok)
	}

	attID, err := c.AttachENI(ctx, e.ID, testInstance, 1)
	if err != nil {
		t.Fatalf("AttachENI: %v", err)
	}
	if err := c.SetDeleteOnTermination(ctx, e.ID, attID, true); err != nil {
		t.Fatalf("SetDeleteOnTermination: %v", err)
	}
	added, err := c.AssignAddresses(ctx, e.ID, 3, false)
	if err != nil {
		t.Fatalf("AssignAddresses: %v", err)
	}
	if len(added) != 3 {
		t.Fatalf("assigned %v, want 3 addresses", added)
	}
	for _, a := range added {
		if _, err := netip.ParseAddr(a); err != nil || slices.Contains(e.Addresses, a) {
			t.Errorf("assigned %q: not a new address (%v)", a, err)
		}
	}

	got := describeOne(t, c, e.ID)
	if got.InstanceID != testInstance || got.AttachmentID != attID || got.DeviceIndex != 1 || !got.DeleteOnTermination {
		t.Errorf("after attach: %+v", got)
	}
	if len(got.Addresses) != 8 {
		t.Errorf("after assign: %d secondaries, want 8", len(got.Addresses))
	}

	if err := c.UnassignAddresses(ctx, e.ID, added[:2], nil); err != nil {
		t.Fatalf("UnassignAddresses: %v", err)
	}
	if got := describeOne(t, c, e.ID); len(got.Addresses) != 6 || slices.Contains(got.Addresses, added[0]) {
		t.Errorf("after unassign: %v", got.Addresses)
	}
	// Nothing to unassign: no call at all.
	before := c.Calls()["UnassignPrivateIpAddresses"]
	if err := c.UnassignAddresses(ctx, e.ID, nil, nil); err != nil || c.Calls()["UnassignPrivateIpAddresses"] != before {
		t.Errorf("empty unassign: err %v, calls %d -> %d", err, before, c.Calls()["UnassignPrivateIpAddresses"])
	}

	if err := c.DetachENI(ctx, attID, false); err != nil {
		t.Fatalf("DetachENI: %v", err)
	}
	waitStatus(t, c, e.ID, "available")
	if err := c.DeleteENI(ctx, e.ID); err != nil {
		t.Fatalf("DeleteENI: %v", err)
	}
	if left, err := c.DescribeENIs(ctx, DescribeENIsInput{IDs: []string{e.ID}}); err != nil || len(left) != 0 {
		t.Errorf("after delete, describe = %v, %v; want nothing", left, err)
	}

	err = c.DeleteENI(ctx, e.ID)
	if !IsNotFound(err) || Code(err) != CodeNetworkInterfaceNotFound {
		t.Errorf("second delete: %v, want %s", err, CodeNetworkInterfaceNotFound)
	}
	var ae *APIError
	if !errors.As(err, &ae) || ae.Action != "DeleteNetworkInterface" || ae.Message == "" {
		t.Errorf("second delete error %#v, want *APIError naming the action with EC2's message", err)
	}
	checkCountersAgree(t, c, sim)
}

func describeOne(t *testing.T, c *Client, id string) ENIInfo {
	t.Helper()
	got, err := c.DescribeENIs(context.Background(), DescribeENIsInput{IDs: []string{id}})
	if err != nil {
		t.Fatalf("DescribeENIs(%s): %v", id, err)
	}
	if len(got) != 1 || got[0].ID != id {
		t.Fatalf("DescribeENIs(%s) = %+v, want that one ENI", id, got)
	}
	return got[0]
}

// waitStatus polls until the ENI reaches status; detach takes simulated
// time. The deadline is generous: it guards against hanging, not speed.
func waitStatus(t *testing.T, c *Client, id, status string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if describeOne(t, c, id).Status == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became %s", id, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCreateENIClientToken: a repeated token returns the first ENI, not a
// second one; the same token with other parameters is refused. This is
// what lets a new leader redo a create a crashed one may have sent.
func TestCreateENIClientToken(t *testing.T) {
	sim := startSim(t, testScenario())
	c := newClient(t, sim, nil, 0)
	ctx := context.Background()
	in := CreateENIInput{SubnetID: testSubnet, SecondaryCount: 2, ClientToken: "tok-1"}
	a, err := c.CreateENI(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateENI(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != b.ID {
		t.Errorf("same client token created %s and %s", a.ID, b.ID)
	}
	in.SecondaryCount = 3
	if _, err := c.CreateENI(ctx, in); Code(err) != CodeIdempotentParameterMismatch {
		t.Errorf("reused token with other parameters: %v, want %s", err, CodeIdempotentParameterMismatch)
	}
	if _, err := c.CreateENI(ctx, CreateENIInput{SubnetID: testSubnet, SecondaryCount: 1, PrefixCount: 1}); err == nil {
		t.Error("both secondaries and prefixes accepted")
	}
	if n := sim.Counters()["CreateNetworkInterface"].Calls; n != 3 {
		t.Errorf("awssim saw %d creates, want 3 (the invalid one is refused before sending)", n)
	}
}

func TestPrefixes(t *testing.T) {
	sim := startSim(t, testScenario())
	c := newClient(t, sim, nil, 0)
	ctx := context.Background()
	e, err := c.CreateENI(ctx, CreateENIInput{SubnetID: testSubnet, PrefixCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Prefixes) != 2 || len(e.Addresses) != 0 {
		t.Fatalf("created ENI prefixes %v addresses %v, want 2 prefixes only", e.Prefixes, e.Addresses)
	}
	added, err := c.AssignAddresses(ctx, e.ID, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 1 {
		t.Fatalf("assigned %v, want one prefix", added)
	}
	for _, p := range append(e.Prefixes, added...) {
		if pf, err := netip.ParsePrefix(p); err != nil || pf.Bits() != 28 {
			t.Errorf("prefix %q is not a /28 (%v)", p, err)
		}
	}
	if err := c.UnassignAddresses(ctx, e.ID, nil, added); err != nil {
		t.Fatal(err)
	}
	if got := describeOne(t, c, e.ID); !reflect.DeepEqual(got.Prefixes, e.Prefixes) {
		t.Errorf("after unassigning %v: prefixes %v, want %v", added, got.Prefixes, e.Prefixes)
	}
	if _, err := c.AssignAddresses(ctx, e.ID, 0, true); err == nil {
		t.Error("assign of 0 accepted")
	}
}

// TestErrorsAreNotRetried: only throttling is retried; anything else comes
// back at once as an *APIError with EC2's code.
func TestErrorsAreNotRetried(t *testing.T) {
	sim := startSim(t, testScenario())
	c := newClient(t, sim, nil, 0)
	_, err := c.AttachENI(context.Background(), "eni-0123456789abcdef0", testInstance, 1)
	if !IsNotFound(err) {
		t.Fatalf("attach of a missing ENI: %v, want NotFound", err)
	}
	var ae *APIError
	if !errors.As(err, &ae) || ae.Action != "AttachNetworkInterface" {
		t.Errorf("error %#v, want *APIError for AttachNetworkInterface", err)
	}
	if n := c.Calls()["AttachNetworkInterface"]; n != 1 {
		t.Errorf("%d attach calls, want 1", n)
	}
	if IsThrottle(err) || IsAddressShortage(err) {
		t.Errorf("predicates misfire on %v", err)
	}
	checkCountersAgree(t, c, sim)
}

func TestNewRequiresRegion(t *testing.T) {
	if _, err := New(context.Background(), Config{Endpoint: "http://127.0.0.1:1"}); err == nil {
		t.Error("New without a region succeeded")
	}
}
