package podnet

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

func node(az string, tags map[string]string) store.Node {
	return store.Node{InstanceID: "i-01", AvailabilityZone: az, VPCID: "vpc-1", SubnetID: "subnet-node",
		SecurityGroups: []string{"sg-node"}, Tags: tags}
}

func TestFor(t *testing.T) {
	nets := []store.PodNetwork{
		{Name: "all"},
		{Name: "zone-a", Selector: store.NodeSelector{AvailabilityZone: "us-east-1a"}},
		{Name: "b-zone-a", Selector: store.NodeSelector{AvailabilityZone: "us-east-1a"}},
		{Name: "gpu-a", Selector: store.NodeSelector{AvailabilityZone: "us-east-1a", NodeGroup: "gpu"}},
		{Name: "tagged", Selector: store.NodeSelector{InstanceTags: map[string]string{"team": "x", "tier": "web"}}},
	}
	for _, tc := range []struct {
		name string
		n    store.Node
		want string
	}{
		{"zone only: two equally specific, the first name", node("us-east-1a", nil), "b-zone-a"},
		{"other zone: the catch-all", node("us-east-1b", nil), "all"},
		{"node group in zone beats zone", node("us-east-1a", map[string]string{allotv1.NodeGroupTag: "gpu"}), "gpu-a"},
		{"node group elsewhere does not match", node("us-east-1b", map[string]string{allotv1.NodeGroupTag: "gpu"}), "all"},
		{"two tags beat the zone", node("us-east-1a", map[string]string{"team": "x", "tier": "web"}), "tagged"},
		{"one tag of two: no match", node("us-east-1b", map[string]string{"team": "x"}), "all"},
		{"tag value must be exact", node("us-east-1b", map[string]string{"team": "x", "tier": "db"}), "all"},
	} {
		got, ok := For(nets, tc.n)
		if !ok || got.Name != tc.want {
			t.Errorf("%s: got %q (%v), want %q", tc.name, got.Name, ok, tc.want)
		}
		// Order of the input never changes the answer.
		rev := slices.Clone(nets)
		slices.Reverse(rev)
		if got2, _ := For(rev, tc.n); got2.Name != got.Name {
			t.Errorf("%s: reversed input chose %q, want %q", tc.name, got2.Name, got.Name)
		}
	}
	if _, ok := For(nets[1:2], node("us-east-1b", nil)); ok {
		t.Error("a zone selector matched a node of another zone")
	}
}

func TestPlace(t *testing.T) {
	subnets := map[string]store.Subnet{
		"subnet-a1": {ID: "subnet-a1", AvailabilityZone: "us-east-1a", VPCID: "vpc-1"},
		"subnet-a2": {ID: "subnet-a2", AvailabilityZone: "us-east-1a", VPCID: "vpc-1"},
		"subnet-b1": {ID: "subnet-b1", AvailabilityZone: "us-east-1b", VPCID: "vpc-1"},
		"subnet-x1": {ID: "subnet-x1", AvailabilityZone: "us-east-1a", VPCID: "vpc-2"},
	}
	n := node("us-east-1a", map[string]string{"pool": "p"})

	// No network: the node's own subnet and groups.
	p := Place(nil, n, subnets)
	if p.Network != "" || !slices.Equal(p.Subnets, []string{"subnet-node"}) || !slices.Equal(p.SecurityGroups, []string{"sg-node"}) {
		t.Errorf("default placement = %+v", p)
	}

	nets := []store.PodNetwork{{Name: "pods", Selector: store.NodeSelector{InstanceTags: map[string]string{"pool": "p"}},
		SubnetIDs: []string{"subnet-b1", "subnet-a2", "subnet-x1", "subnet-gone"}, Discovered: []string{"subnet-a1"},
		SecurityGroups: []string{"sg-pods"}}}
	p = Place(nets, n, subnets)
	if !slices.Equal(p.Subnets, []string{"subnet-a1", "subnet-a2"}) {
		t.Errorf("subnets = %v, want the two in the node's zone and VPC", p.Subnets)
	}
	if !slices.Equal(p.SecurityGroups, []string{"sg-pods"}) {
		t.Errorf("groups = %v", p.SecurityGroups)
	}
	refused := strings.Join(p.Refused, "|")
	for _, w := range []string{"subnet-b1: in zone us-east-1b", "subnet-x1: in vpc-2", "subnet-gone: not yet recorded"} {
		if !strings.Contains(refused, w) {
			t.Errorf("refused %q lacks %q", refused, w)
		}
	}
	if p.Problem() != "" {
		t.Errorf("problem %q with usable subnets", p.Problem())
	}

	// Only a subnet of another zone: nothing usable, and the status says why.
	nets[0].SubnetIDs, nets[0].Discovered, nets[0].SecurityGroups = []string{"subnet-b1"}, nil, nil
	p = Place(nets, n, subnets)
	if len(p.Subnets) != 0 || !strings.Contains(p.Problem(), "subnet-b1: in zone us-east-1b, the node is in us-east-1a") {
		t.Errorf("placement %+v, problem %q", p, p.Problem())
	}
	if !slices.Equal(p.SecurityGroups, []string{"sg-node"}) {
		t.Errorf("groups = %v, want the node's when the network names none", p.SecurityGroups)
	}
}

func TestNoPrefix(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later := now.Add(time.Minute)
	subnets := map[string]store.Subnet{
		"subnet-1": {ID: "subnet-1", NoPrefixUntil: later, NoPrefixReason: "ec2 AssignPrivateIpAddresses: InsufficientCidrBlocks: no /28"},
		"subnet-2": {ID: "subnet-2"},
		"subnet-3": {ID: "subnet-3", NoPrefixUntil: now}, // over: tried again
		"subnet-4": {ID: "subnet-4", NoPrefixUntil: later, NoPrefixReason: "InsufficientCidrBlocks"},
	}
	for _, tc := range []struct {
		name      string
		place     []string
		enis      []string
		want      Fallback
		inMessage string
	}{
		{name: "no subnet lacks a /28", place: []string{"subnet-2", "subnet-3"}, enis: []string{"subnet-2"}},
		{
			name:  "one of two lacks one: new ENIs go to the other, which keeps prefix mode",
			place: []string{"subnet-1", "subnet-2"}, enis: []string{"subnet-1"},
			want:      Fallback{Subnets: []string{"subnet-1"}, Prefix: []string{"subnet-2"}},
			inMessage: "new ENIs go to subnet-2",
		},
		{
			name:  "every subnet lacks one: secondary addresses",
			place: []string{"subnet-1", "subnet-4"}, enis: []string{"subnet-2"},
			want:      Fallback{Subnets: []string{"subnet-1", "subnet-4"}, Secondary: true},
			inMessage: "secondary IP addresses instead of prefixes",
		},
		{
			name:  "an ENI's subnet lacks one though new ENIs go elsewhere",
			place: []string{"subnet-2"}, enis: []string{"subnet-1", "subnet-1"},
			want:      Fallback{Subnets: []string{"subnet-1"}, Prefix: []string{"subnet-2"}},
			inMessage: "InsufficientCidrBlocks",
		},
	} {
		got := NoPrefix(Placement{Subnets: tc.place}, tc.enis, subnets, now)
		if !slices.Equal(got.Subnets, tc.want.Subnets) || got.Secondary != tc.want.Secondary ||
			(tc.want.Active() && !slices.Equal(got.Prefix, tc.want.Prefix)) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
		if msg := got.Message(subnets); !strings.Contains(msg, tc.inMessage) || (msg == "") != !tc.want.Active() {
			t.Errorf("%s: message %q; want one containing %q", tc.name, msg, tc.inMessage)
		}
	}
}

func TestHome(t *testing.T) {
	subnets := map[string]store.Subnet{
		"subnet-node": {ID: "subnet-node", AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Usable: 1000},
		"subnet-p1":   {ID: "subnet-p1", AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Usable: 500, Headroom: 400},
		"subnet-p2":   {ID: "subnet-p2", AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Usable: 200},
		"subnet-b":    {ID: "subnet-b", AvailabilityZone: "us-east-1b", VPCID: "vpc-1", Usable: 9000},
	}
	nets := []store.PodNetwork{{Name: "pods", Selector: store.NodeSelector{AvailabilityZone: "us-east-1a"},
		SubnetIDs: []string{"subnet-p1", "subnet-p2", "subnet-b"}}}
	n := node("us-east-1a", nil)
	n.SubnetID = "subnet-node"
	if got := Home(nets, n, subnets); got != "subnet-p2" {
		t.Errorf("home %q; want subnet-p2 (200 left, p1 only 100, b in another zone)", got)
	}
	if got := Home(nil, n, subnets); got != "subnet-node" {
		t.Errorf("home without networks %q; want the node's own subnet", got)
	}
	other := node("us-east-1c", nil)
	other.SubnetID = "subnet-node"
	if got := Home(nets, other, subnets); got != "subnet-node" {
		t.Errorf("home of an unselected node %q; want its own subnet", got)
	}
}

// TestAtHomeClosesPrimaries: a node whose network leaves out its own
// subnet is counted one ENI less and its primary ENI is closed; a network
// that includes the subnet, and no network, close nothing.
func TestAtHomeClosesPrimaries(t *testing.T) {
	subnets := []store.Subnet{
		{ID: "subnet-node", AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Usable: 100},
		{ID: "subnet-p1", AvailabilityZone: "us-east-1a", VPCID: "vpc-1", Usable: 500},
	}
	n := node("us-east-1a", nil)
	n.SubnetID, n.PrimaryENIID, n.MaxENIs = "subnet-node", "eni-primary", 4
	for name, tc := range map[string]struct {
		nets       []store.PodNetwork
		maxENIs    int
		home       string
		wantClosed bool
	}{
		"leaves out the node's subnet": {[]store.PodNetwork{{Name: "pods", SubnetIDs: []string{"subnet-p1"}}}, 3, "subnet-p1", true},
		"includes the node's subnet":   {[]store.PodNetwork{{Name: "pods", SubnetIDs: []string{"subnet-p1", "subnet-node"}}}, 4, "subnet-p1", false},
		"no network":                   {nil, 4, "subnet-node", false},
	} {
		nodes, closed := AtHome(tc.nets, []store.Node{n}, subnets)
		if nodes[0].MaxENIs != tc.maxENIs || nodes[0].SubnetID != tc.home || closed["eni-primary"] != tc.wantClosed {
			t.Errorf("%s: max ENIs %d, home %s, closed %v; want %d, %s, %v", name,
				nodes[0].MaxENIs, nodes[0].SubnetID, closed, tc.maxENIs, tc.home, tc.wantClosed)
		}
	}
}
