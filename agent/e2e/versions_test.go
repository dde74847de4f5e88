package e2e_test

import (
	"net/netip"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/allotnet/allot/agent/e2e/harness"
)

// TestSpecVersions: a runtime speaking each supported CNI spec version
// (the conflist's cniVersion) gets a result it can parse at that version,
// a wired pod, a passing CHECK and a clean DEL.
func TestSpecVersions(t *testing.T) {
	env := harness.NewEnv(t, bins, harness.EnvConfig{Agent: harness.AgentConfig{WarmIPs: 4, Cooldown: 200 * time.Millisecond}})
	ctx := ctxFor(t, time.Minute)
	for _, ver := range []string{"0.4.0", "1.0.0", "1.1.0"} {
		t.Run(ver, func(t *testing.T) {
			list := harness.AllotConflist(t, ver, env.Agent.Config.Socket, env.Agent.Config.DelQueue)
			rt := harness.NewRuntime(t, bins.Dir, list, nil)
			p := harness.NewPod(t, "e2e", "v"+ver)
			raw, err := rt.CNI.AddNetworkList(ctx, list, p.RT)
			if err != nil {
				t.Fatalf("ADD: %v", err)
			}
			if raw.Version() != ver {
				t.Errorf("result is version %s, want %s", raw.Version(), ver)
			}
			cur, err := current.NewResultFromResult(raw)
			if err != nil {
				t.Fatal(err)
			}
			addr := resultAddr(t, cur)
			verifyWired(t, env, map[*harness.Pod]netip.Addr{p: addr})
			if err := rt.Check(ctx, p); err != nil {
				t.Errorf("CHECK: %v", err)
			}
			if err := rt.Del(ctx, p); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			assertAllGone(t, env, map[*harness.Pod]netip.Addr{p: addr})
		})
	}
}
