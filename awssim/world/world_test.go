package world

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim/simclock"
)

func newTestWorld(t *testing.T, cfg Config) (*World, *simclock.Manual, string, string) {
	t.Helper()
	clk := simclock.NewManual(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg.Clock = clk
	w := New(cfg)
	v, err := w.AddVPC(VPCSpec{CIDRs: []string{"10.0.0.0/16"}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := w.AddSubnet(SubnetSpec{VPCID: v.ID, AvailabilityZone: "us-east-1a", CIDR: "10.0.0.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	inst, err := w.AddInstance(InstanceSpec{Type: "m5.large", SubnetID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	return w, clk, s.ID, inst.ID
}

func code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return fmt.Sprint(err)
}

func TestDetachCompletesAfterDelay(t *testing.T) {
	w, clk, subnet, inst := newTestWorld(t, Config{DetachDelay: 3 * time.Second})
	e, err := w.CreateNetworkInterface(CreateNetworkInterfaceInput{SubnetID: subnet})
	if err != nil {
		t.Fatal(err)
	}
	att, err := w.AttachNetworkInterface(e.ID, inst, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.DetachNetworkInterface(att, false); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2999 * time.Millisecond)
	w.Tick()
	if got, _ := w.NetworkInterface(e.ID); got.Status != StatusDetaching {
		t.Fatalf("status %s before the delay; want detaching", got.Status)
	}
	clk.Advance(time.Millisecond)
	w.Tick()
	if got, _ := w.NetworkInterface(e.ID); got.Status != StatusAvailable || got.Attachment != nil {
		t.Fatalf("status %s after the delay; want available", got.Status)
	}
	if err := w.DetachNetworkInterface(att, false); code(err) != CodeAttachmentNotFound {
		t.Fatalf("detach of a finished attachment: %v", err)
	}
}

func TestIMDSHistoryLags(t *testing.T) {
	w, clk, subnet, inst := newTestWorld(t, Config{IMDSLag: 2 * time.Second})
	md, ok := w.Metadata(inst)
	if !ok || len(md.Interfaces) != 1 || len(md.Interfaces[0].LocalIPv4s) != 1 {
		t.Fatalf("launch metadata %+v", md)
	}
	primary := md.Interfaces[0].ENIID
	clk.Advance(10 * time.Second)
	if _, err := w.AssignPrivateIPAddresses(AssignInput{ENIID: primary, Count: 2}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if _, err := w.AssignPrivateIPAddresses(AssignInput{ENIID: primary, Count: 1}); err != nil {
		t.Fatal(err)
	}
	counts := func() int { md, _ := w.Metadata(inst); return len(md.Interfaces[0].LocalIPv4s) }
	if n := counts(); n != 1 {
		t.Fatalf("1 s after the first assign IMDS shows %d addresses; want 1", n)
	}
	clk.Advance(time.Second) // first assign is 2 s old
	if n := counts(); n != 3 {
		t.Fatalf("2 s after the first assign IMDS shows %d; want 3", n)
	}
	clk.Advance(time.Second)
	if n := counts(); n != 4 {
		t.Fatalf("2 s after the second assign IMDS shows %d; want 4", n)
	}
	e, _ := w.CreateNetworkInterface(CreateNetworkInterfaceInput{SubnetID: subnet, PrefixCount: 1})
	if _, err := w.AttachNetworkInterface(e.ID, inst, 2); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	md, _ = w.Metadata(inst)
	if len(md.Interfaces) != 2 || md.Interfaces[1].DeviceNumber != 2 || len(md.Interfaces[1].IPv4Prefixes) != 1 ||
		md.Interfaces[1].SubnetCIDR != "10.0.0.0/24" || !slices.Equal(md.Interfaces[1].VPCCIDRs, []string{"10.0.0.0/16"}) {
		t.Fatalf("metadata after attach %+v", md.Interfaces)
	}
	if len(w.imds[inst].snaps) > 2 {
		t.Fatalf("history keeps %d snapshots; old ones should be pruned", len(w.imds[inst].snaps))
	}
}

func TestHooksSeeChangesInOrder(t *testing.T) {
	w, _, subnet, inst := newTestWorld(t, Config{})
	var got []string
	remove := w.AddHooks(HookFuncs{
		Attach:           func(i string, e NetworkInterface) { got = append(got, "attach "+e.ID) },
		Detach:           func(i string, e NetworkInterface) { got = append(got, "detach "+e.ID) },
		AddressesChanged: func(e NetworkInterface) { got = append(got, fmt.Sprintf("addr %s %d", e.ID, len(e.SecondaryIPs))) },
	})
	e, _ := w.CreateNetworkInterface(CreateNetworkInterfaceInput{SubnetID: subnet})
	att, _ := w.AttachNetworkInterface(e.ID, inst, 1)
	_, _ = w.AssignPrivateIPAddresses(AssignInput{ENIID: e.ID, Count: 2})
	_ = w.UnassignPrivateIPAddresses(UnassignInput{ENIID: e.ID, Addresses: []string{"10.0.0.6"}})
	_ = w.DetachNetworkInterface(att, false) // zero delay: completes at once
	remove()
	_, _ = w.AttachNetworkInterface(e.ID, inst, 1)
	want := []string{"attach " + e.ID, "addr " + e.ID + " 2", "addr " + e.ID + " 1", "detach " + e.ID}
	if !slices.Equal(got, want) {
		t.Fatalf("hooks %q; want %q", got, want)
	}
}

// TestFailedOperationsAreAtomic: a create or assign that fails part-way
// leaves the subnet's count unchanged.
func TestFailedOperationsAreAtomic(t *testing.T) {
	w, _, subnet, _ := newTestWorld(t, Config{})
	before, _ := w.Subnet(subnet)
	_, err := w.CreateNetworkInterface(CreateNetworkInterfaceInput{SubnetID: subnet, SecondaryIPs: []string{"10.0.0.10", "10.0.0.10"}})
	if code(err) != CodeInvalidParameterValue {
		t.Fatalf("duplicate explicit address: %v", err)
	}
	e, _ := w.CreateNetworkInterface(CreateNetworkInterfaceInput{SubnetID: subnet})
	_, err = w.AssignPrivateIPAddresses(AssignInput{ENIID: e.ID, Addresses: []string{"10.0.0.20", "10.0.0.4"}}) // .4 is the instance's
	if code(err) != CodeAddressInUse {
		t.Fatalf("assign with an in-use address: %v", err)
	}
	after, _ := w.Subnet(subnet)
	if after.AvailableIPs != before.AvailableIPs-1 {
		t.Fatalf("available %d -> %d; only the new ENI's primary should be used", before.AvailableIPs, after.AvailableIPs)
	}
	if got, _ := w.NetworkInterface(e.ID); len(got.SecondaryIPs) != 0 {
		t.Fatalf("failed assign left %v", got.SecondaryIPs)
	}
}

func TestIDs(t *testing.T) {
	for _, c := range []struct {
		prefix, id string
		ok         bool
	}{
		{PrefixENI, "eni-0123456789abcdef0", true},
		{PrefixENI, "eni-01234567", true},
		{PrefixENI, "eni-0123456789ABCDEF0", false},
		{PrefixENI, "eni-attach-0123456789abcdef0", false},
		{PrefixAttachment, "eni-attach-0123456789abcdef0", true},
		{PrefixInstance, "i-0123456789abcdef0", true},
		{PrefixSubnet, "subnet-0123", false},
	} {
		if got := ValidID(c.prefix, c.id); got != c.ok {
			t.Errorf("ValidID(%s, %s) = %v", c.prefix, c.id, got)
		}
	}
}
