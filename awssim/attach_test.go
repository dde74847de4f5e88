package awssim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/world"
)

func (h *harness) createENI(t *testing.T, subnet string, secondaries int32) string {
	t.Helper()
	out, err := h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(subnet), SecondaryPrivateIpAddressCount: aws.Int32(secondaries),
	})
	if err != nil {
		t.Fatalf("CreateNetworkInterface: %v", err)
	}
	return *out.NetworkInterface.NetworkInterfaceId
}

func (h *harness) attach(eni, instance string, idx int32) (string, error) {
	out, err := h.ec2.AttachNetworkInterface(h.ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: aws.String(eni), InstanceId: aws.String(instance), DeviceIndex: aws.Int32(idx),
	})
	if err != nil {
		return "", err
	}
	return *out.AttachmentId, nil
}

func (h *harness) describeENI(t *testing.T, id string) types.NetworkInterface {
	t.Helper()
	out, err := h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
	if err != nil {
		t.Fatalf("DescribeNetworkInterfaces(%s): %v", id, err)
	}
	return out.NetworkInterfaces[0]
}

func (h *harness) addInstance(t *testing.T, typ, subnet string) string {
	t.Helper()
	inst, err := h.sim.AddInstance(world.InstanceSpec{Type: typ, SubnetID: subnet})
	if err != nil {
		t.Fatalf("AddInstance(%s): %v", typ, err)
	}
	return inst.ID
}

// TestAttachLimitsPerType fills each type's ENI slots and checks the next
// attach fails with AttachmentLimitExceeded, and that a taken device index
// is refused with InvalidParameterValue.
func TestAttachLimitsPerType(t *testing.T) {
	h := startDefault(t)
	for _, c := range []struct {
		typ     string
		maxENIs int
	}{{"c5.xlarge", 4}, {"m5.large", 3}, {"r5.2xlarge", 4}, {"m5.24xlarge", 15}, {"t3.medium", 3}} {
		t.Run(c.typ, func(t *testing.T) {
			inst := h.addInstance(t, c.typ, subnetA)
			first := h.createENI(t, subnetA, 0)
			if _, err := h.attach(first, inst, 0); err == nil {
				t.Fatal("attach at device index 0 (the primary's) succeeded")
			} else {
				apiErr(t, err, "InvalidParameterValue", fmt.Sprintf("Instance '%s' already has an interface attached at device index '0'.", inst))
			}
			for i := 1; i < c.maxENIs; i++ {
				eni := first
				if i > 1 {
					eni = h.createENI(t, subnetA, 0)
				}
				if _, err := h.attach(eni, inst, int32(i)); err != nil {
					t.Fatalf("attach #%d: %v", i, err)
				}
			}
			extra := h.createENI(t, subnetA, 0)
			_, err := h.attach(extra, inst, int32(c.maxENIs))
			apiErr(t, err, "AttachmentLimitExceeded", fmt.Sprintf("Interface count %d exceeds the limit for %s", c.maxENIs+1, c.typ))
			got, _ := h.sim.World().Instance(inst)
			if len(got.NetworkInterfaces) != c.maxENIs {
				t.Fatalf("%d ENIs attached; want %d", len(got.NetworkInterfaces), c.maxENIs)
			}
		})
	}
}

func TestAttachRules(t *testing.T) {
	h := startDefault(t)
	inst := "i-0000000000000c5a1"
	eni := h.createENI(t, subnetA, 2)
	attID, err := h.attach(eni, inst, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := h.describeENI(t, eni)
	if got.Status != types.NetworkInterfaceStatusInUse || *got.Attachment.InstanceId != inst ||
		*got.Attachment.DeviceIndex != 1 || *got.Attachment.AttachmentId != attID || *got.Attachment.DeleteOnTermination {
		t.Fatalf("after attach: %+v %+v", got, got.Attachment)
	}
	// Attaching an ENI that is in use.
	_, err = h.attach(eni, inst, 2)
	apiErr(t, err, "InvalidNetworkInterface.InUse", "")
	// Device index taken.
	other := h.createENI(t, subnetA, 0)
	_, err = h.attach(other, inst, 1)
	apiErr(t, err, "InvalidParameterValue", "Instance '"+inst+"' already has an interface attached at device index '1'.")
	// Different AZ.
	bENI := h.createENI(t, subnetB, 0)
	_, err = h.attach(bENI, inst, 2)
	apiErr(t, err, "InvalidParameterCombination", "")
	// Unknown instance / ENI.
	_, err = h.attach(other, "i-0123456789abcdef0", 2)
	apiErr(t, err, "InvalidInstanceID.NotFound", "The instance ID 'i-0123456789abcdef0' does not exist")
	_, err = h.attach("eni-0123456789abcdef0", inst, 2)
	apiErr(t, err, "InvalidNetworkInterfaceID.NotFound", "The networkInterface ID 'eni-0123456789abcdef0' does not exist")
	// Deleting an attached ENI.
	_, err = h.ec2.DeleteNetworkInterface(h.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eni)})
	apiErr(t, err, "InvalidParameterValue", "Network interface '"+eni+"' is currently in use.")
	// Too many addresses for the type: c5.xlarge has 15 slots per ENI.
	big := h.createENI(t, subnetA, 15)
	_, err = h.attach(big, inst, 2)
	apiErr(t, err, "PrivateIpAddressLimitExceeded", "")
	// Primary can't be detached.
	primary := h.sim.World().Instances()[0].NetworkInterfaces[0]
	_, err = h.ec2.DetachNetworkInterface(h.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(primary.Attachment.ID)})
	apiErr(t, err, "OperationNotPermitted", "")
}

// TestAsyncDetach checks an ENI stays "detaching" (and undeletable) for the
// detach delay and then becomes available.
func TestAsyncDetach(t *testing.T) {
	sc := testScenario()
	sc.Throttle.Disabled = true
	// 20 s simulated at 100x = 200 ms real: long enough to observe.
	h := start(t, awssim.Config{Scenario: sc, TimeScale: 100, DetachDelay: 20 * time.Second})
	inst := "i-0000000000000c5a1"
	eni := h.createENI(t, subnetA, 1)
	att, err := h.attach(eni, inst, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.ec2.DetachNetworkInterface(h.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(att)}); err != nil {
		t.Fatal(err)
	}
	got := h.describeENI(t, eni)
	if got.Status != types.NetworkInterfaceStatusDetaching || got.Attachment == nil || got.Attachment.Status != types.AttachmentStatusDetaching {
		t.Fatalf("right after detach: status %s attachment %+v; want detaching", got.Status, got.Attachment)
	}
	_, err = h.ec2.DeleteNetworkInterface(h.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eni)})
	apiErr(t, err, "InvalidParameterValue", "Network interface '"+eni+"' is currently in use.")
	// The device index stays taken while detaching.
	other := h.createENI(t, subnetA, 0)
	if _, err := h.attach(other, inst, 1); err == nil {
		t.Fatal("attach at a detaching ENI's index succeeded")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = h.describeENI(t, eni)
		if got.Status == types.NetworkInterfaceStatusAvailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ENI still %s after 10 s real (detach delay 200 ms real)", got.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got.Attachment != nil {
		t.Fatalf("available ENI keeps attachment %+v", got.Attachment)
	}
	if _, err := h.ec2.DeleteNetworkInterface(h.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eni)}); err != nil {
		t.Fatalf("delete after detach: %v", err)
	}
	if _, err := h.attach(other, inst, 1); err != nil {
		t.Fatalf("attach at the freed index: %v", err)
	}
}

func TestModifyDeleteOnTermination(t *testing.T) {
	h := startDefault(t)
	inst := h.addInstance(t, "m5.large", subnetA)
	before := h.available(t, subnetA)
	keep := h.createENI(t, subnetA, 2)
	drop := h.createENI(t, subnetA, 2)
	keepAtt, err := h.attach(keep, inst, 1)
	if err != nil {
		t.Fatal(err)
	}
	dropAtt, err := h.attach(drop, inst, 2)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.ec2.ModifyNetworkInterfaceAttribute(h.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String(drop),
		Attachment:         &types.NetworkInterfaceAttachmentChanges{AttachmentId: aws.String(dropAtt), DeleteOnTermination: aws.Bool(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.describeENI(t, drop); !*got.Attachment.DeleteOnTermination {
		t.Fatal("DeleteOnTermination not set")
	}
	// The wrong attachment ID is refused.
	_, err = h.ec2.ModifyNetworkInterfaceAttribute(h.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String(drop),
		Attachment:         &types.NetworkInterfaceAttachmentChanges{AttachmentId: aws.String(keepAtt), DeleteOnTermination: aws.Bool(true)},
	})
	apiErr(t, err, "InvalidAttachmentID.NotFound", "")
	if err := h.sim.RemoveInstance(inst); err != nil {
		t.Fatal(err)
	}
	// The primary and drop are gone with their addresses; keep is available.
	if got := h.describeENI(t, keep); got.Status != types.NetworkInterfaceStatusAvailable || got.Attachment != nil {
		t.Fatalf("kept ENI after termination: %s %+v", got.Status, got.Attachment)
	}
	_, err = h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{drop}})
	apiErr(t, err, "InvalidNetworkInterfaceID.NotFound", "")
	if got, want := h.available(t, subnetA), before-3+1; got != want {
		t.Fatalf("available after termination = %d; want %d (kept ENI's 3 used, primary freed)", got, want)
	}
}
