package e2e_test

import (
	"os"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/allotnet/allot/agent/e2e/harness"
	"github.com/allotnet/allot/cni/plugin"
)

// TestFrozenAgent: with allot-agent stopped by SIGSTOP, STATUS answers 50
// within its bound, ADD answers 11 and DEL is queued, each within the
// plugin's connect bound rather than gRPC's 20 s; thawed, it answers again.
func TestFrozenAgent(t *testing.T) {
	env := harness.NewEnv(t, bins, harness.EnvConfig{Agent: harness.AgentConfig{WarmIPs: 2}})
	ctx := ctxFor(t, 2*time.Minute)
	p := harness.NewPod(t, "e2e", "frozen-0")
	if _, err := env.Runtime.Add(ctx, p); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	thaw := env.Agent.Freeze()

	const slack = 1500 * time.Millisecond
	start := time.Now()
	err := env.Runtime.Status(ctx)
	if d := time.Since(start); d > plugin.StatusTimeout+slack {
		t.Errorf("STATUS with a frozen agent took %v, want within %v", d, plugin.StatusTimeout+slack)
	}
	if code := cniCode(err); code != types.ErrPluginNotAvailable {
		t.Errorf("STATUS with a frozen agent: %v, want code 50", err)
	}
	start = time.Now()
	_, err = env.Runtime.Add(ctx, harness.NewPod(t, "e2e", "frozen-1"))
	if d := time.Since(start); d > plugin.ConnectTimeout+slack {
		t.Errorf("ADD with a frozen agent took %v, want within %v", d, plugin.ConnectTimeout+slack)
	}
	if code := cniCode(err); code != types.ErrTryAgainLater {
		t.Errorf("ADD with a frozen agent: %v, want code 11", err)
	}
	start = time.Now()
	if err := env.Runtime.Del(ctx, p); err != nil {
		t.Fatalf("DEL with a frozen agent must be queued: %v", err)
	}
	if d := time.Since(start); d > plugin.ConnectTimeout+slack {
		t.Errorf("DEL with a frozen agent took %v, want within %v", d, plugin.ConnectTimeout+slack)
	}
	if entries, err := os.ReadDir(env.Agent.Config.DelQueue); err != nil || len(entries) != 1 {
		t.Fatalf("DEL queue holds %v (err %v), want the one DEL", entries, err)
	}

	thaw()
	if err := env.Runtime.Status(ctx); err != nil {
		t.Errorf("STATUS after thawing: %v", err)
	}
}
