package ipamd

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/allotnet/allot/agent/identity"
)

// Start is nodeInit at v1.23.1: the node's identity from IMDS,
// DescribeAllENIs, TagENI and setupENI for every attached ENI, RefreshSGIDs,
// then handlePreScaling, the first pool increase. The pool manager (Run)
// does the rest. A failed Start is a failed nodeInit: the real ipamd
// exits, and StartSupervised restarts it.
func (n *Node) Start(ctx context.Context) error {
	// A restarted ipamd rebuilds its datastore from nothing.
	n.ds.reset()
	id, err := identity.Fetch(ctx, n.imds)
	if err != nil {
		return fmt.Errorf("ipamd %s: identity: %w", n.cfg.InstanceID, err)
	}
	p, ok := id.Primary()
	if !ok {
		return fmt.Errorf("ipamd %s: no primary ENI in IMDS", n.cfg.InstanceID)
	}
	n.subnetID, n.vpcID, n.az, n.securityGroups = p.SubnetID, p.VPCID, id.AvailabilityZone, p.SecurityGroupIDs
	tags, err := n.describeAllENIs(ctx, id.ENIs)
	if err != nil {
		return fmt.Errorf("ipamd %s: init: failed to retrieve attached ENIs info: %w", n.cfg.InstanceID, err)
	}
	for _, m := range id.ENIs {
		if tags[m.ENIID][eniNodeTagKey] != n.cfg.InstanceID {
			if err := n.tagENI(ctx, m.ENIID); err != nil {
				return fmt.Errorf("ipamd %s: init: failed to tag managed ENI %s: %w", n.cfg.InstanceID, m.ENIID, err)
			}
		}
		for retry := 1; ; retry++ {
			err := n.setupENI(ctx, m, m.MAC == id.PrimaryMAC)
			if err == nil {
				break
			}
			if retry > maxRetryCheckENI {
				n.countErr("waitENIAttachedMaxRetryExceeded")
				break
			}
			if err := n.sleep(ctx, eniAttachTime); err != nil {
				return err
			}
		}
	}
	n.refreshSGIDs(ctx)
	if n.Low() {
		if err := n.increaseDatastorePool(ctx); err != nil {
			return fmt.Errorf("ipamd %s: init: error while trying to increase datastore pool: %w", n.cfg.InstanceID, err)
		}
	}
	return nil
}

// describeAllENIs is DescribeAllENIs: one DescribeNetworkInterfaces of the
// ENIs IMDS lists, tried up to 12 times (each try with the SDK's own
// retries), retryCount×10 ms apart; it returns each ENI's tags.
func (n *Node) describeAllENIs(ctx context.Context, enis []identity.ENIMeta) (map[string]map[string]string, error) {
	ids := make([]string, 0, len(enis))
	for _, m := range enis {
		ids = append(ids, m.ENIID)
	}
	var out *ec2.DescribeNetworkInterfacesOutput
	var err error
	for retry := 0; retry < maxENIEC2APIRetries; retry++ {
		out, err = n.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: ids})
		if err == nil {
			break
		}
		if serr := n.sleep(ctx, time.Duration(retry*10)*time.Millisecond); serr != nil {
			return nil, serr
		}
	}
	if err != nil {
		return nil, err
	}
	tags := map[string]map[string]string{}
	for _, ni := range out.NetworkInterfaces {
		t := map[string]string{}
		for _, tag := range ni.TagSet {
			t[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
		}
		tags[aws.ToString(ni.NetworkInterfaceId)] = t
	}
	return tags, nil
}

// tagENI is TagENI: CreateTags with the node's tag, retried 5 times from
// 500 ms (30% jitter, doubling).
func (n *Node) tagENI(ctx context.Context, eniID string) error {
	return n.withBackoff(ctx, 500*time.Millisecond, 0.3, 5, func() error {
		_, err := n.ec2.CreateTags(ctx, &ec2.CreateTagsInput{
			Resources: []string{eniID},
			Tags:      []types.Tag{{Key: aws.String(eniNodeTagKey), Value: aws.String(n.cfg.InstanceID)}},
		})
		return err
	})
}

// setupENI adds an attached ENI to the datastore and, once its subnet is
// checked (with subnet discovery: IsSubnetExcluded, a DescribeSubnets), its
// addresses.
func (n *Node) setupENI(ctx context.Context, m identity.ENIMeta, primary bool) error {
	n.ds.addENI(m.ENIID, m.DeviceNumber, primary)
	if n.cfg.SubnetDiscovery {
		if _, err := n.vpcSubnets(ctx); err != nil {
			n.countErr("setupENI")
			return fmt.Errorf("set up %s: subnet exclusion check: %w", m.ENIID, err)
		}
	}
	if len(m.IPv4s) > 1 {
		n.ds.addIPs(m.ENIID, m.IPv4s[1:])
	}
	n.ds.addPrefixes(m.ENIID, m.Prefixes)
	return nil
}

// refreshSGIDs is RefreshSGIDs on a fresh process: its cache of security
// groups is empty, so every ENI in the datastore gets a
// ModifyNetworkInterfaceAttribute with the primary ENI's groups; failures
// are only logged.
func (n *Node) refreshSGIDs(ctx context.Context) {
	if len(n.securityGroups) == 0 {
		return
	}
	for _, e := range n.ds.allocatable(1<<30, n.cfg.PrefixMode) {
		_, err := n.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
			NetworkInterfaceId: aws.String(e.id), Groups: n.securityGroups,
		})
		if err != nil {
			n.countErr("refreshSGIDs")
		}
	}
}
