package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// TestCheckSelectedNodes: a network is refused when a registered node it
// selects is in another VPC, or in a zone where it has no subnet and no
// subnet tag could find one.
func TestCheckSelectedNodes(t *testing.T) {
	infos := []ec2client.SubnetInfo{{ID: "subnet-a", AZ: "us-east-1a", VPCID: "vpc-1"}}
	nodes := []store.Node{
		{InstanceID: "i-a", AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Tags: map[string]string{"pool": "a"}},
		{InstanceID: "i-b", AvailabilityZone: "us-east-1b", VPCID: "vpc-1", Tags: map[string]string{"pool": "b"}},
		{InstanceID: "i-x", AvailabilityZone: "us-east-1a", VPCID: "vpc-2", Tags: map[string]string{"pool": "x"}},
	}
	sel := func(pool string) store.NodeSelector {
		return store.NodeSelector{InstanceTags: map[string]string{"pool": pool}}
	}
	for _, tc := range []struct {
		name string
		pn   store.PodNetwork
		want string // "" for accepted
	}{
		{"node in zone and VPC", store.PodNetwork{Name: "n", Selector: sel("a")}, ""},
		{"selects no node", store.PodNetwork{Name: "n", Selector: sel("none")}, ""},
		{"node in another zone", store.PodNetwork{Name: "n", Selector: sel("b")}, "node i-b in zone us-east-1b"},
		{"node in another zone, tags may find", store.PodNetwork{Name: "n", Selector: sel("b"), SubnetTags: map[string]string{"k": ""}}, ""},
		{"node in another VPC", store.PodNetwork{Name: "n", Selector: sel("x")}, "node i-x in vpc-2"},
		{"every node", store.PodNetwork{Name: "n"}, "i-b"},
	} {
		err := checkSelectedNodes(tc.pn, infos, nodes)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, rpcerr.ErrInvalid)):
			t.Errorf("%s: %v, want an invalid-argument error naming %q", tc.name, err, tc.want)
		}
	}
}
