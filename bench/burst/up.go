package burst

import (
	"context"
	"fmt"
	"time"

	"github.com/allotnet/allot/bench/lowerbound"
)

// roundFleet is the allot fleet for a burst after the first: every node's
// backend tracked (live set, container IDs of the round's own).
type roundFleet struct {
	*allotFleet
	round string
	live  *liveSet
}

func (r roundFleet) backends() []cni {
	out := make([]cni, len(r.nodes))
	for i, n := range r.nodes {
		out[i] = tracked{inner: n.agent, node: n.inst.ID, round: r.round, live: r.live}
	}
	return out
}

// secondBurst runs the same burst again from the state the way down left,
// its floor and minimum computed from that state as the first burst's
// are from the warm fleet's.
func secondBurst(ctx context.Context, env upDownEnv, live *liveSet, fig *UpDownFigures, progress func(string, ...any)) error {
	// The floor assumes full buckets, as the first burst's does.
	if err := waitBucketsFull(ctx, env.cfg, env.admin, env.broker); err != nil {
		return err
	}
	enis, err := env.admin.ENIs(ctx)
	if err != nil {
		return err
	}
	instSubnet := subnetsOf(env.insts)
	mode, per := env.fleet.mode, env.cfg.PodsPerNode
	up := &fig.Up
	up.Pods = len(env.insts) * per
	up.Minimum = lowerbound.MinCalls(idealPlan(mode, env.limits, per, instSubnet, enis, true))
	podsOnly := idealPlan(mode, env.limits, per, instSubnet, enis, false)
	up.LowerBoundSim = lowerBound(lowerbound.MinCalls(podsOnly), env.share).Seconds()
	if err := env.admin.ResetCounters(ctx); err != nil {
		return err
	}
	progress("second burst: %d pods; lower bound %.1fs simulated", up.Pods, up.LowerBoundSim)
	rf := roundFleet{allotFleet: env.fleet, round: "second", live: live}
	pods, _, took, _ := burst(ctx, env.cfg, Profile{Kind: ProfileAll}, rf, nil, func(placed int, elapsed time.Duration) {
		progress("second burst %6.1fs sim: %d/%d pods placed", env.cfg.simOf(elapsed).Seconds(), placed, up.Pods)
	})
	var ttas []time.Duration
	var last time.Duration
	for _, p := range pods {
		if p.Placed {
			up.Placed++
			ttas = append(ttas, env.cfg.simOf(p.TTA))
			last = max(last, p.Done)
		}
	}
	if up.Placed < up.Pods {
		last = took
		fig.Problems = append(fig.Problems, fmt.Sprintf("second burst: %d of %d pods got no address", up.Pods-up.Placed, up.Pods))
	}
	up.TTA = percentiles(ttas)
	up.CompletionSim = env.cfg.simOf(last).Seconds()
	if up.LowerBoundSim > 0 {
		up.Ratio = up.CompletionSim / up.LowerBoundSim
	}
	// Calls are counted until the pools are topped up again, as the
	// first burst's are.
	if err := waitWarm(ctx, env.cfg, rf, 2*time.Minute, progress); err != nil {
		if ctx.Err() != nil {
			return err
		}
		fig.Problems = append(fig.Problems, "second burst: "+err.Error())
	}
	if err := waitQuiet(ctx, env.cfg, env.admin); err != nil {
		return err
	}
	if up.Calls, up.Throttled, err = env.admin.Calls(ctx); err != nil {
		return err
	}
	up.AtMinimum = atMinimum(up.Calls, up.Minimum)
	endENIs, err := env.admin.ENIs(ctx)
	if err != nil {
		return err
	}
	for _, p := range checkAddresses(pods, env.insts, endENIs) {
		fig.Problems = append(fig.Problems, "second burst: "+p)
	}
	progress("second burst: %d/%d placed, completion %.1fs simulated (%.2f x floor)", up.Placed, up.Pods, up.CompletionSim, up.Ratio)
	return nil
}
