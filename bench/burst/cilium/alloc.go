package cilium

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// maxAttachRetries bounds CreateInterface's attach retries on an index
// conflict.
const maxAttachRetries = 5

// allocate is determineMaintenanceAction, PrepareIPAllocation and
// handleIPAllocation: the node's neededIPs plus its pending pods beyond
// them, assigned on the first ENI with room, or a new ENI when none has
// room or the assign fails. It reports whether EC2 state changed.
func (n *Node) allocate(ctx context.Context) (bool, error) {
	n.recalculate()
	needed := n.neededIPs()
	if needed == 0 {
		return false, nil
	}
	o := n.o
	o.mu.Lock()
	enis := slices.Clone(o.cache[n.id])
	o.mu.Unlock()
	slices.SortFunc(enis, func(a, b *eni) int { return a.index - b.index })
	per := o.cfg.IPv4PerENI - 1
	if o.cfg.PrefixDelegation {
		per *= allotv1.PrefixSize
	}
	surge := max(n.pendingPods()-needed, 0)
	maxIPs := needed + o.cfg.MaxAboveWatermark + surge
	for _, e := range enis {
		if room := per - len(e.addrs); room > 0 {
			err := o.assign(ctx, e.id, min(room, maxIPs))
			if err == nil {
				return true, nil
			}
			o.log.Debug("assign failed, will create a new interface", "eni", e.id, "err", err)
			break
		}
	}
	if len(enis) >= o.cfg.MaxENIs {
		return false, nil
	}
	return n.createInterface(ctx, enis, maxIPs)
}

// assign is AllocateIPs: AssignENIPrefixes with enough prefixes for count
// addresses, or AssignPrivateIpAddresses of count.
func (o *Operator) assign(ctx context.Context, eniID string, count int) error {
	in := &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(eniID)}
	if o.cfg.PrefixDelegation {
		in.Ipv4PrefixCount = aws.Int32(int32((count + allotv1.PrefixSize - 1) / allotv1.PrefixSize))
	} else {
		in.SecondaryPrivateIpAddressCount = aws.Int32(int32(count))
	}
	if err := o.limit(ctx); err != nil {
		return err
	}
	_, err := o.ec2.AssignPrivateIpAddresses(ctx, in)
	return err
}

// createInterface is CreateInterface: an ENI in the node's subnet with
// min(maxIPs, addresses per ENI - 1) addresses (or as many prefixes as
// those need), attached at the next free index (retried on a conflict),
// marked DeleteOnTermination, and added to the cache with the create's
// answer. A failed attach or modify deletes the ENI.
func (n *Node) createInterface(ctx context.Context, enis []*eni, maxIPs int) (bool, error) {
	o := n.o
	toAllocate := min(maxIPs, o.cfg.IPv4PerENI-1)
	if toAllocate <= 0 || len(enis) == 0 {
		return false, nil
	}
	primary := enis[0]
	in := &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(primary.subnetID), Groups: primary.groups,
		Description: aws.String("Cilium-CNI (" + n.id + ")"),
	}
	if o.cfg.PrefixDelegation {
		in.Ipv4PrefixCount = aws.Int32(int32((toAllocate + allotv1.PrefixSize - 1) / allotv1.PrefixSize))
	} else {
		in.SecondaryPrivateIpAddressCount = aws.Int32(int32(toAllocate))
	}
	if err := o.limit(ctx); err != nil {
		return false, err
	}
	out, err := o.ec2.CreateNetworkInterface(ctx, in)
	if err != nil {
		return false, fmt.Errorf("unable to create ENI: %w", err)
	}
	created := parseENI(*out.NetworkInterface)
	index := nextIndex(enis, 0)
	var attachment string
	for retry := 0; retry < maxAttachRetries; retry++ {
		if err = o.limit(ctx); err != nil {
			return false, err
		}
		var att *ec2.AttachNetworkInterfaceOutput
		att, err = o.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
			DeviceIndex: aws.Int32(int32(index)), InstanceId: aws.String(n.id), NetworkInterfaceId: aws.String(created.id),
		})
		if err == nil {
			attachment = aws.ToString(att.AttachmentId)
			break
		}
		if !indexConflict(err) {
			break
		}
		index = nextIndex(enis, index+1)
	}
	if err == nil {
		if err = o.limit(ctx); err == nil {
			_, err = o.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
				NetworkInterfaceId: aws.String(created.id),
				Attachment:         &types.NetworkInterfaceAttachmentChanges{AttachmentId: aws.String(attachment), DeleteOnTermination: aws.Bool(true)},
			})
		}
	}
	if err != nil {
		if o.limit(ctx) == nil {
			_, _ = o.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(created.id)})
		}
		return false, fmt.Errorf("unable to attach ENI at index %d: %w", index, err)
	}
	created.index = index
	o.mu.Lock()
	o.cache[n.id] = append(o.cache[n.id], created)
	o.mu.Unlock()
	return true, nil
}

// nextIndex is findNextIndex: the first device index from start no ENI
// holds.
func nextIndex(enis []*eni, start int) int {
	for slices.ContainsFunc(enis, func(e *eni) bool { return e.index == start }) {
		start++
	}
	return start
}

// indexConflict is isAttachmentIndexConflict.
func indexConflict(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "InvalidParameterValue" && strings.Contains(api.ErrorMessage(), "interface attached at device")
}
