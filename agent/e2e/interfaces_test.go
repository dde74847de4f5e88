package e2e_test

import (
	"slices"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/allotnet/allot/agent/e2e/harness"
)

// secondInterface is the same sandbox as p with another interface name, as a
// runtime attaching a second network interface to a pod calls it.
func secondInterface(p *harness.Pod, ifName string) *harness.Pod {
	rt := *p.RT
	rt.IfName = ifName
	return &harness.Pod{Namespace: p.Namespace, Name: p.Name, NS: p.NS, RT: &rt}
}

// podRoutes returns the routes through p's interface, failing the test if
// the interface is gone.
func podRoutes(t *testing.T, p *harness.Pod) []string {
	t.Helper()
	s, err := harness.InspectPod(p)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Exists {
		t.Fatalf("%s has no %s", p, p.RT.IfName)
	}
	return s.Routes
}

// TestSecondInterface: ADD of eth1 into a pod that has eth0 leaves eth0's
// routes (its default route above all) in place, both attachments pass
// CHECK, and DEL of eth1 leaves eth0 exactly as it was.
func TestSecondInterface(t *testing.T) {
	env := harness.NewEnv(t, bins, harness.EnvConfig{Agent: harness.AgentConfig{WarmIPs: 3}})
	ctx := ctxFor(t, 2*time.Minute)
	eth0 := harness.NewPod(t, "e2e", "multi-0")
	res0, err := env.Runtime.Add(ctx, eth0)
	if err != nil {
		t.Fatalf("ADD eth0: %v", err)
	}
	before := podRoutes(t, eth0)
	if !slices.Contains(before, "default via 169.254.1.1 scope universe") {
		t.Fatalf("eth0 routes %v have no default route", before)
	}

	eth1 := secondInterface(eth0, "eth1")
	res1, err := env.Runtime.Add(ctx, eth1)
	if err != nil {
		t.Fatalf("ADD eth1: %v", err)
	}
	if resultAddr(t, res0) == resultAddr(t, res1) {
		t.Fatalf("eth0 and eth1 both got %s", resultAddr(t, res0))
	}
	if got := podRoutes(t, eth0); !slices.Equal(got, before) {
		t.Errorf("ADD of eth1 changed eth0's routes: %v, were %v", got, before)
	}
	for _, p := range []*harness.Pod{eth0, eth1} {
		if err := env.Runtime.Check(ctx, p); err != nil {
			t.Errorf("CHECK %s %s with both interfaces: %v", p, p.RT.IfName, err)
		}
	}

	if err := env.Runtime.Del(ctx, eth1); err != nil {
		t.Fatalf("DEL eth1: %v", err)
	}
	waitTornDown(t, env)
	if got := podRoutes(t, eth0); !slices.Equal(got, before) {
		t.Errorf("after DEL of eth1 eth0's routes are %v, were %v", got, before)
	}
	if err := env.Runtime.Check(ctx, eth0); err != nil {
		t.Errorf("CHECK eth0 after DEL of eth1: %v", err)
	}
	if s, err := harness.InspectPod(eth1); err != nil || s.Exists {
		t.Errorf("eth1 still in the pod after its DEL (err %v)", err)
	}
}

// TestReAddOtherNetNS: a second ADD of the same attachment (container ID and
// ifname) naming another netns is refused: the pod's eth0 stays in the
// netns it was wired into, and the agent's record keeps naming that netns.
func TestReAddOtherNetNS(t *testing.T) {
	env := harness.NewEnv(t, bins, harness.EnvConfig{Agent: harness.AgentConfig{WarmIPs: 3}})
	ctx := ctxFor(t, 2*time.Minute)
	p := harness.NewPod(t, "e2e", "moved-0")
	if _, err := env.Runtime.Add(ctx, p); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	before := podRoutes(t, p)

	other := harness.NewNetNS(t, "pod")
	rt := *p.RT
	rt.NetNS = other.Path
	moved := &harness.Pod{Namespace: p.Namespace, Name: p.Name, NS: other, RT: &rt}
	_, err := env.Runtime.Add(ctx, moved)
	if err == nil {
		t.Error("ADD of a wired attachment into another netns succeeded")
	} else if code := cniCode(err); code != types.ErrInvalidEnvironmentVariables {
		t.Errorf("ADD into another netns: code %d (%v), want %d (CNI_NETNS conflicts with the attachment)", code, err, types.ErrInvalidEnvironmentVariables)
	}
	if got := podRoutes(t, p); !slices.Equal(got, before) {
		t.Errorf("eth0 in the first netns changed: routes %v, were %v", got, before)
	}
	if s, err := harness.InspectPod(moved); err != nil || s.Exists {
		t.Errorf("the second netns got an eth0 (err %v)", err)
	}
	if err := env.Runtime.Check(ctx, p); err != nil {
		t.Errorf("CHECK in the first netns: %v", err)
	}
	st, err := env.Agent.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	for _, al := range st.Allocations {
		if al.ContainerID == p.RT.ContainerID && al.Netns != p.RT.NetNS {
			t.Errorf("checkpoint records netns %s for the attachment, want %s", al.Netns, p.RT.NetNS)
		}
	}
}
