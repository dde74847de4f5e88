package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/instanceview"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// InstanceFacts is EC2's word on an instance (broker/instanceview's
// cache). Register takes from it, not from the agent, every fact EC2 can
// answer.
type InstanceFacts interface {
	Get(ctx context.Context, id string) (ec2client.InstanceInfo, error)
}

var _ InstanceFacts = (*instanceview.Cache)(nil)

// checkClaims holds a registration's claims against EC2's description of
// the instance and refuses the first that disagrees, naming both values:
// an agent that names another instance's primary ENI or a subnet in
// another zone would otherwise have the broker act on what it said. What
// the record keeps is EC2's.
func checkClaims(ctx context.Context, facts InstanceFacts, n *store.Node) error {
	in, err := facts.Get(ctx, n.InstanceID)
	switch {
	case errors.Is(err, instanceview.ErrNotFound):
		return fmt.Errorf("register %s: EC2 does not know this instance: %w", n.InstanceID, rpcerr.ErrInvalid)
	case err != nil:
		return fmt.Errorf("register %s: ask EC2 about the instance: %w", n.InstanceID, err)
	}
	if in.State != "running" {
		return fmt.Errorf("register %s: EC2 says the instance is %s, not running: %w", n.InstanceID, in.State, rpcerr.ErrInvalid)
	}
	for _, c := range []struct{ field, claimed, ec2 string }{
		{"instance_type", n.InstanceType, in.Type},
		{"availability_zone", n.AvailabilityZone, in.AZ},
		{"vpc_id", n.VPCID, in.VPCID},
		{"subnet_id", n.SubnetID, in.SubnetID},
		{"primary_eni_id", n.PrimaryENIID, in.PrimaryENI},
		{"primary_ip", n.PrimaryIP, in.PrimaryIP},
	} {
		if c.claimed != c.ec2 {
			return fmt.Errorf("register %s: node.%s: the agent says %s, EC2 says %s: %w",
				n.InstanceID, c.field, short(c.claimed), short(c.ec2), rpcerr.ErrInvalid)
		}
	}
	if !sameSet(n.SecurityGroups, in.SecurityGroups) {
		return fmt.Errorf("register %s: node.security_group_ids: the agent says %v, EC2 says %v: %w",
			n.InstanceID, n.SecurityGroups, in.SecurityGroups, rpcerr.ErrInvalid)
	}
	n.InstanceType, n.AvailabilityZone, n.VPCID, n.SubnetID = in.Type, in.AZ, in.VPCID, in.SubnetID
	n.PrimaryENIID, n.PrimaryIP, n.SecurityGroups = in.PrimaryENI, in.PrimaryIP, slices.Clone(in.SecurityGroups)
	n.Tags = maps.Clone(in.Tags)
	return nil
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// short quotes at most 48 bytes of a caller's value.
func short(v string) string {
	if len(v) <= 48 {
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%q… (%d bytes)", v[:48], len(v))
}
