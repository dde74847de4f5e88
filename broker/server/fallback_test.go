package server

import (
	"strings"
	"testing"
	"time"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// A prefix-mode node whose subnet can't give a /28 says so in allotctl
// nodes (ListNodes): the subnet, until when, EC2's answer and that it gets
// secondary addresses; a node in another subnet says nothing of it.
func TestListNodesShowsPrefixFallback(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	e.subnet(t, subnet1, "10.0.1.0/24", 251)
	e.subnet(t, subnet2, "10.0.2.0/26", 59)
	for _, n := range []struct{ id, subnet string }{{node1, subnet1}, {node2, subnet2}} {
		if _, err := e.node.Register(ctx, &allotv1.RegisterRequest{
			Node: identity(n.id, n.subnet), Mode: allotv1.AddressMode_ADDRESS_MODE_PREFIX,
			Warm: &allotv1.WarmTargets{WarmPrefixTarget: 1},
		}); err != nil {
			t.Fatalf("register %s: %v", n.id, err)
		}
	}
	until := time.Now().Add(5 * time.Minute)
	reason := "ec2 AssignPrivateIpAddresses: InsufficientCidrBlocks: The specified subnet does not have enough free cidr blocks"
	if _, err := e.st.SetNoPrefix(ctx, subnet1, until, reason); err != nil {
		t.Fatal(err)
	}
	resp, err := e.admin.ListNodes(ctx, &allotv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*allotv1.NodeSummary{}
	for _, n := range resp.GetNodes() {
		got[n.GetInstanceId()] = n
	}
	fb := got[node1].GetPrefixFallback()
	for _, want := range []string{subnet1, "InsufficientCidrBlocks", until.UTC().Format(time.RFC3339), "secondary IP addresses"} {
		if !strings.Contains(fb, want) {
			t.Errorf("node1 prefix_fallback %q does not say %q", fb, want)
		}
	}
	if got[node1].GetMode() != "prefix" || got[node2].GetMode() != "prefix" {
		t.Errorf("modes %q, %q; want prefix", got[node1].GetMode(), got[node2].GetMode())
	}
	if fb := got[node2].GetPrefixFallback(); fb != "" {
		t.Errorf("node2, in a subnet with free /28s, has prefix_fallback %q", fb)
	}

	// Once the time is up the subnet is tried again and the note goes.
	if _, err := e.st.SetNoPrefix(ctx, subnet1, time.Time{}, ""); err != nil {
		t.Fatal(err)
	}
	resp, err = e.admin.ListNodes(ctx, &allotv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range resp.GetNodes() {
		if n.GetPrefixFallback() != "" {
			t.Errorf("%s still has prefix_fallback %q after the subnet was cleared", n.GetInstanceId(), n.GetPrefixFallback())
		}
	}
}
