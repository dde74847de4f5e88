package e2e_test

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/e2e/harness"
)

// TestStorm: hundreds of ADDs and DELs at once over a few dozen sandboxes,
// several of them racing on the same container ID, as a runtime under
// churn (or a buggy one) would send them. Afterwards the agent's
// checkpoint, its /v1/pods and the node's devices, routes and rules agree
// exactly, no address is held twice, every held address is EC2's and every
// recorded pod is wired; a CHECK of each recorded pod passes; and DELs of
// everything leave nothing behind.
func TestStorm(t *testing.T) {
	const (
		sandboxes = 40
		ops       = 400
		parallel  = 12
	)
	env := harness.NewEnv(t, bins, harness.EnvConfig{Agent: harness.AgentConfig{
		WarmIPs: 8, MinimumIPs: 44, Cooldown: 50 * time.Millisecond, MaxAddWait: 5 * time.Second}})
	ctx := ctxFor(t, 3*time.Minute)
	pods := newPods(t, "storm", sandboxes)

	rng := rand.New(rand.NewPCG(1, 2))
	type op struct {
		add bool
		pod *harness.Pod
	}
	plan := make([]op, ops)
	for i := range plan {
		// A few hot sandboxes take a third of the operations, so ADD and
		// DEL of the same container ID overlap often.
		p := pods[rng.IntN(sandboxes)]
		if rng.IntN(3) == 0 {
			p = pods[rng.IntN(4)]
		}
		plan[i] = op{add: rng.IntN(5) < 3, pod: p}
	}

	var adds, dels, tryLater atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for _, o := range plan {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var err error
			if o.add {
				_, err = env.Runtime.Add(ctx, o.pod)
				adds.Add(1)
			} else {
				err = env.Runtime.Del(ctx, o.pod)
				dels.Add(1)
			}
			switch {
			case err == nil:
			case o.add && cniCode(err) == 11:
				tryLater.Add(1) // an empty pool, briefly: the runtime retries
			default:
				t.Errorf("storm %s of %s: %v", map[bool]string{true: "ADD", false: "DEL"}[o.add], o.pod, err)
			}
		})
	}
	wg.Wait()
	t.Logf("storm: %d ADDs (%d told to try again later), %d DELs over %d sandboxes", adds.Load(), tryLater.Load(), dels.Load(), sandboxes)

	recs := agreement(t, ctx, env)
	live := map[*harness.Pod]netip.Addr{}
	for _, p := range pods {
		if a, ok := recs[harness.Key(harness.Network, p)]; ok {
			live[p] = a
		}
	}
	if len(live) != len(recs) {
		t.Errorf("checkpoint holds %d attachments, %d of them the storm's sandboxes", len(recs), len(live))
	}
	verifyWired(t, env, live)
	for p, addr := range live {
		if _, cached := env.Runtime.CachedResult(p); !cached {
			// The storm runs ADD and DEL of one container ID at once, which
			// a runtime never does: libcni's result cache can then lose
			// the result of an ADD that stands (the DEL's cache removal
			// lands after the ADD's write). A runtime would repeat the ADD;
			// it must return the recorded address.
			res, err := env.Runtime.Add(ctx, p)
			if err != nil {
				t.Errorf("repeated ADD %s after the storm: %v", p, err)
				continue
			}
			if len(res.IPs) != 1 || res.IPs[0].Address.IP.String() != addr.String() {
				t.Errorf("repeated ADD %s after the storm gave %v, want the recorded %s", p, res.IPs, addr)
			}
		}
		if err := env.Runtime.Check(ctx, p); err != nil {
			t.Errorf("CHECK %s after the storm: %v", p, err)
		}
	}
	t.Logf("after the storm %d sandboxes are wired", len(live))

	for _, p := range pods {
		if err := env.Runtime.Del(ctx, p); err != nil {
			t.Errorf("final DEL %s: %v", p, err)
		}
	}
	if recs := agreement(t, ctx, env); len(recs) != 0 {
		t.Errorf("after DEL of every sandbox the checkpoint holds %v", recs)
	}
}
