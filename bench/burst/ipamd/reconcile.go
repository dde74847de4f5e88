package ipamd

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/allotnet/allot/agent/identity"
)

// nodeIPPoolReconcileInterval: reconcile only when the pool has not grown
// for this long ("to reduce the number of EC2 API calls").
const nodeIPPoolReconcileInterval = 60 * time.Second

// nodeIPPoolReconcile is ipamd's reconcile of the datastore against IMDS:
// attached ENIs it doesn't know (one it attached but lost track of, when
// waiting for IMDS gave up) are described in EC2 (DescribeAllENIs) and
// added; a known ENI whose IMDS addresses differ from the datastore's is
// read from EC2 (GetIPv4sFromEC2) and its addresses added. ENIs no longer
// attached are dropped. It reads IMDS every time it runs and calls EC2 only
// on a disagreement.
func (n *Node) nodeIPPoolReconcile(ctx context.Context) error {
	if n.sinceAction() <= n.wall(nodeIPPoolReconcileInterval) {
		return nil
	}
	defer n.poolActionNow()
	attached, err := identity.ENIs(ctx, n.imds)
	if err != nil {
		return err
	}
	known := map[string]eni{}
	for _, e := range n.ds.allocatable(1<<30, n.cfg.PrefixMode) {
		known[e.id] = e
	}
	unknown := slices.ContainsFunc(attached, func(m identity.ENIMeta) bool { _, ok := known[m.ENIID]; return !ok })
	if unknown {
		if _, err := n.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{
			Filters: []types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{n.cfg.InstanceID}}},
		}); err != nil {
			return err
		}
	}
	for _, m := range attached {
		e, ok := known[m.ENIID]
		if !ok {
			n.ds.addENI(m.ENIID, m.DeviceNumber, false)
		} else if !similar(e, m, n.cfg.PrefixMode) {
			if err := n.refreshENI(ctx, m.ENIID); err != nil {
				return err
			}
			continue
		}
		if len(m.IPv4s) > 1 {
			n.ds.addIPs(m.ENIID, m.IPv4s[1:])
		}
		n.ds.addPrefixes(m.ENIID, m.Prefixes)
	}
	return nil
}

// similar is cniutils.IPsSimilar / PrefixSimilar: the datastore and IMDS
// hold the same secondary addresses (or prefixes) of the ENI.
func similar(e eni, m identity.ENIMeta, prefixMode bool) bool {
	if prefixMode {
		return len(e.prefixes) == len(m.Prefixes) && !slices.ContainsFunc(m.Prefixes, func(p netip.Prefix) bool {
			return !slices.Contains(e.prefixes, p.Masked())
		})
	}
	secondary := m.IPv4s
	if len(secondary) > 0 {
		secondary = secondary[1:]
	}
	return len(e.ips) == len(secondary) && !slices.ContainsFunc(secondary, func(a netip.Addr) bool {
		return !slices.Contains(e.ips, a)
	})
}
