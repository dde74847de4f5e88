package e2e_test

import (
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/e2e/harness"
)

// TestNameReuse: a StatefulSet pod comes back under the same name and
// namespace in a new sandbox (new container ID) before the old sandbox's
// DEL arrives. The old DEL — delivered late, or queued by the plugin while
// the agent was down and replayed when it starts — removes only the old
// sandbox's network; the new pod keeps its address and network.
func TestNameReuse(t *testing.T) {
	env := harness.NewEnv(t, bins, harness.EnvConfig{Agent: harness.AgentConfig{WarmIPs: 5, Cooldown: 200 * time.Millisecond}})
	ctx := ctxFor(t, 2*time.Minute)

	old := harness.NewPod(t, "e2e", "db-0")
	res, err := env.Runtime.Add(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	oldAddr := resultAddr(t, res)

	// The new sandbox's ADD comes first.
	cur := old.NewSandbox(t)
	res, err = env.Runtime.Add(ctx, cur)
	if err != nil {
		t.Fatal(err)
	}
	curAddr := resultAddr(t, res)
	if curAddr == oldAddr {
		t.Fatalf("the new sandbox got %s, still held by the old one", curAddr)
	}

	// Then the old sandbox's DEL.
	if err := env.Runtime.Del(ctx, old); err != nil {
		t.Fatalf("DEL of the old sandbox: %v", err)
	}
	expectOnly(t, env, map[*harness.Pod]netip.Addr{cur: curAddr}, old)

	// Again with the agent down when the old DEL comes: the plugin queues
	// it, and the agent applies it when it starts.
	next := cur.NewSandbox(t)
	res, err = env.Runtime.Add(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	nextAddr := resultAddr(t, res)
	env.Agent.Stop()
	if err := env.Runtime.Del(ctx, cur); err != nil {
		t.Fatalf("DEL with the agent down must succeed (queued): %v", err)
	}
	if q, _ := os.ReadDir(env.Agent.Config.DelQueue); len(q) != 1 {
		t.Fatalf("DEL queue holds %v, want the one queued DEL", q)
	}
	env.Agent.Start()
	env.Agent.WaitReady(t, 30*time.Second)
	if q, _ := os.ReadDir(env.Agent.Config.DelQueue); len(q) != 0 {
		t.Errorf("DEL queue still holds %v after the agent started", q)
	}
	expectOnly(t, env, map[*harness.Pod]netip.Addr{next: nextAddr}, old, cur)
}

// expectOnly checks that exactly the live pods are recorded and wired (and
// pass CHECK), and nothing is left of the dead ones.
func expectOnly(t *testing.T, env *harness.Env, live map[*harness.Pod]netip.Addr, dead ...*harness.Pod) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	want := harness.Records{}
	for p, a := range live {
		want[harness.Key(harness.Network, p)] = a
		if err := env.Runtime.Check(ctx, p); err != nil {
			t.Errorf("CHECK %s: %v", p, err)
		}
	}
	for _, d := range harness.Diff("checkpoint", agreement(t, ctx, env), "live pods", want) {
		t.Error(d)
	}
	verifyWired(t, env, live)
	host, err := harness.InspectHost(env.Node.NS)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dead {
		if _, ok := host.Veths[harness.HostVethName(harness.Network, p)]; ok {
			t.Errorf("%s's host veth is still there", p)
		}
		if ps, err := harness.InspectPod(p); err != nil || ps.Exists {
			t.Errorf("%s still has eth0 (%v, err %v)", p, ps.Addrs, err)
		}
	}
}
