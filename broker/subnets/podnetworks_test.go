package subnets_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/broker/subnets"
)

// TestPodNetworkDiscovery: each pod network's tags find its subnets (in the
// VPC of the subnets it names, else anywhere), those outside the
// selector's zone are left out and said so, and a pass that finds what the
// last one did costs one DescribeSubnets for all networks, one etcd
// request (the list of networks) and no write.
func TestPodNetworkDiscovery(t *testing.T) {
	for name, tc := range map[string]struct {
		networks []store.PodNetwork
		want     map[string][]string
		// describes is the first pass's DescribeSubnets calls: the named
		// subnets (once for all networks) and one search for all networks.
		describes int64
		logs      []string
	}{
		"tags in the VPC of the named subnets": {
			networks:  []store.PodNetwork{{Name: "pods", SubnetIDs: []string{nodesA}, SubnetTags: cni}},
			want:      map[string][]string{"pods": {podsA, podsB}},
			describes: 2,
		},
		"the selector's zone keeps the subnets of that zone": {
			networks: []store.PodNetwork{{Name: "zone-a", Selector: store.NodeSelector{AvailabilityZone: "us-east-1a"},
				SubnetIDs: []string{nodesA}, SubnetTags: cni}},
			want:      map[string][]string{"zone-a": {podsA}},
			describes: 2,
			logs:      []string{podsB + ": in zone us-east-1b, the selector picks nodes in us-east-1a"},
		},
		"any value of a key, in any VPC": {
			networks:  []store.PodNetwork{{Name: "teams", SubnetTags: map[string]string{"team": ""}}},
			want:      map[string][]string{"teams": {green, blue}},
			describes: 1,
		},
		"values with EC2's wildcards": {
			networks:  []store.PodNetwork{{Name: "gr", SubnetTags: map[string]string{"team": "gr*"}}},
			want:      map[string][]string{"gr": {green}},
			describes: 1,
		},
		"tags found in two VPCs are reported": {
			networks:  []store.PodNetwork{{Name: "anywhere", SubnetTags: cni}},
			want:      map[string][]string{"anywhere": {podsA, podsB, podsOther}},
			describes: 1,
			logs:      []string{"in more than one VPC", vpcA, vpcB},
		},
		"nothing found is recorded too": {
			networks:  []store.PodNetwork{{Name: "red", SubnetTags: map[string]string{"team": "red"}}},
			want:      map[string][]string{"red": nil},
			describes: 1,
		},
		"several networks share one search": {
			networks: []store.PodNetwork{
				{Name: "pods", SubnetIDs: []string{nodesA}, SubnetTags: cni},
				{Name: "other", SubnetIDs: []string{nodesB}, SubnetTags: cni},
				{Name: "green", SubnetTags: map[string]string{"team": "green"}},
				{Name: "not-cni", SubnetTags: map[string]string{"kubernetes.io/role/cni": "0"}},
				{Name: "named-only", SubnetIDs: []string{nodesA}},
			},
			want: map[string][]string{"pods": {podsA, podsB}, "other": {podsOther}, "green": {green},
				"not-cni": {blue}, "named-only": nil},
			describes: 2,
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, subnets.Selector{})
			e.putNetworks(t, tc.networks)
			tagged := int64(0)
			for _, pn := range tc.networks {
				if len(pn.SubnetTags) > 0 {
					tagged++
				}
			}
			first := e.refresh(t)
			if first.err != nil {
				t.Fatalf("first pass: %v", first.err)
			}
			if first.discoveryWrites != tagged || first.describeSubnets != tc.describes {
				t.Errorf("first pass: %d discovery writes and %d DescribeSubnets, want %d and %d",
					first.discoveryWrites, first.describeSubnets, tagged, tc.describes)
			}
			got, revs := e.discovered(t)
			for name, ids := range tc.want {
				if !slices.Equal(got[name], sorted(ids)) {
					t.Errorf("pod network %s discovered %v, want %v", name, got[name], sorted(ids))
				}
			}
			for i := range 2 {
				p := e.refresh(t)
				if p.err != nil || p.discoveryWrites != 0 || p.describeSubnets != 1 || p.etcdRequests != 1 {
					t.Errorf("unchanged pass %d: %d discovery writes, %d DescribeSubnets, %d etcd requests, err %v; want 0, 1, 1, nil",
						i+2, p.discoveryWrites, p.describeSubnets, p.etcdRequests, p.err)
				}
			}
			if _, after := e.discovered(t); !maps.Equal(after, revs) {
				t.Errorf("pod network records rewritten by unchanged passes: revisions %v, then %v", revs, after)
			}
			logs := e.logs.String()
			for _, s := range tc.logs {
				if !strings.Contains(logs, s) {
					t.Errorf("log lacks %q:\n%s", s, logs)
				}
			}
			if n := strings.Count(logs, "level=WARN"); n > len(tc.logs) {
				t.Errorf("%d warnings in three passes (a warning repeated each pass?):\n%s", n, logs)
			}
		})
	}
}

// TestDiscoveryFollowsChanges: a subnet newly tagged is found and written
// once; a network whose tags change is searched again at once.
func TestDiscoveryFollowsChanges(t *testing.T) {
	e := newEnv(t, subnets.Selector{})
	e.putNetworks(t, []store.PodNetwork{{Name: "pods", SubnetIDs: []string{nodesA}, SubnetTags: cni}})
	if p := e.refresh(t); p.err != nil {
		t.Fatal(p.err)
	}
	if err := e.sim.World().CreateTags([]string{spare}, cni); err != nil {
		t.Fatal(err)
	}
	if p := e.refresh(t); p.err != nil || p.discoveryWrites != 1 || p.describeSubnets != 1 {
		t.Errorf("pass after tagging %s: %d discovery writes, %d DescribeSubnets, err %v; want 1, 1, nil",
			spare, p.discoveryWrites, p.describeSubnets, p.err)
	}
	got, _ := e.discovered(t)
	if want := sorted([]string{podsA, podsB, spare}); !slices.Equal(got["pods"], want) {
		t.Errorf("discovered %v, want %v", got["pods"], want)
	}
	if _, err := e.st.GetSubnet(ctxT(t), spare); err != nil {
		t.Errorf("newly found subnet %s has no record: %v", spare, err)
	}

	e.putNetworks(t, []store.PodNetwork{{Name: "pods", SubnetIDs: []string{nodesA}, SubnetTags: map[string]string{"team": "green"}}})
	if p := e.refresh(t); p.err != nil || p.discoveryWrites != 1 || p.describeSubnets != 1 {
		t.Errorf("pass after new tags: %d discovery writes, %d DescribeSubnets, err %v; want 1, 1, nil",
			p.discoveryWrites, p.describeSubnets, p.err)
	}
	if got, _ := e.discovered(t); !slices.Equal(got["pods"], []string{green}) {
		t.Errorf("discovered %v after new tags, want [%s]", got["pods"], green)
	}
}

// TestUnknownNamedSubnet: a network naming a subnet EC2 does not know
// fails alone, with its name and the subnet in the error; the others are
// discovered, and the subnets already described are not asked again.
func TestUnknownNamedSubnet(t *testing.T) {
	e := newEnv(t, subnets.Selector{})
	e.putNetworks(t, []store.PodNetwork{
		{Name: "bad", SubnetIDs: []string{unknown}, SubnetTags: cni},
		{Name: "good", SubnetIDs: []string{nodesA}, SubnetTags: map[string]string{"team": "green"}},
	})
	for i := range 2 {
		p := e.refresh(t)
		if p.err == nil || !strings.Contains(p.err.Error(), "pod network bad") || !strings.Contains(p.err.Error(), unknown) ||
			strings.Contains(p.err.Error(), "pod network good") {
			t.Errorf("pass %d: error %v, want one naming pod network bad and %s only", i+1, p.err, unknown)
		}
		if got, _ := e.discovered(t); !slices.Equal(got["good"], []string{green}) || got["bad"] != nil {
			t.Errorf("pass %d: discovered %v, want good: [%s], bad: none", i+1, got, green)
		}
		// The second pass describes only the unknown subnet, then searches.
		if i == 1 && p.describeSubnets != 2 {
			t.Errorf("second pass: %d DescribeSubnets, want 2", p.describeSubnets)
		}
	}
}

// TestSelectedSubnetsNeedNoDescribe: a named subnet the selector already
// found is not described again for the pod network's VPC.
func TestSelectedSubnetsNeedNoDescribe(t *testing.T) {
	e := newEnv(t, subnets.Selector{VPCIDs: []string{vpcA}})
	e.putNetworks(t, []store.PodNetwork{{Name: "pods", SubnetIDs: []string{nodesA}, SubnetTags: cni}})
	for i := range 2 {
		// One search for the selector, one for the pod networks.
		if p := e.refresh(t); p.err != nil || p.describeSubnets != 2 {
			t.Errorf("pass %d: %d DescribeSubnets, err %v; want 2, nil", i+1, p.describeSubnets, p.err)
		}
	}
	if got, _ := e.discovered(t); !slices.Equal(got["pods"], []string{podsA, podsB}) {
		t.Errorf("discovered %v, want [%s %s]", got["pods"], podsA, podsB)
	}
}

func sorted(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}
