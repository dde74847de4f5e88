package burst

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/allotnet/allot/agent/pool"
	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/planner"
)

// UpDown is the way back down and up again after an allot burst: every
// pod deleted, the pools left to cool down and give back to EC2 what their
// warm targets do not need (after each agent's acknowledgement, as always),
// then the same burst again from that state.
type UpDown struct {
	// DownWindow spreads the pods' deletion evenly over this long
	// (simulated), interleaved across the nodes. Default 30s: a Deployment
	// scaled to zero has its pods gone within their grace period.
	DownWindow time.Duration
	// Settle bounds the wait for every pool to be back at its warm
	// targets and EC2 to be quiet (simulated). Default 30 minutes.
	Settle time.Duration
	// lateLast holds the last pod's DEL this long (simulated) beyond the
	// window: the harness's DELs running late, as on a loaded machine.
	lateLast time.Duration
}

// Defaults of the way down.
const (
	DefaultDownWindow = 30 * time.Second
	DefaultDownSettle = 30 * time.Minute
)

func (u UpDown) withDefaults() UpDown {
	if u.DownWindow <= 0 {
		u.DownWindow = DefaultDownWindow
	}
	if u.Settle <= 0 {
		u.Settle = DefaultDownSettle
	}
	return u
}

// UpDownFigures are the way down's and the second burst's figures; times
// are simulated seconds.
type UpDownFigures struct {
	PodsDeleted   int     `json:"pods_deleted"`
	DownWindowSim float64 `json:"down_window_s"`
	// DownCalls are EC2's counts by action from the first DEL until every
	// pool is back at its warm targets and every ENI given up is gone;
	// DownMinimum the fewest (downMinimum); DownExtra what DownCalls hold
	// beyond it, by mutating action.
	DownCalls     map[string]int64 `json:"down_calls"`
	DownMinimum   map[string]int   `json:"down_minimum"`
	DownExtra     map[string]int64 `json:"down_extra,omitempty"`
	DownThrottled int64            `json:"down_request_limit_exceeded"`
	// Proposed is the broker's release proposals; ReleasedAddrs the
	// addresses it gave back.
	Proposed      int64 `json:"releases_proposed"`
	ReleasedAddrs int64 `json:"addresses_released"`
	// BackToWarmSim is from the first DEL (the way down's start) until
	// every pool was at its warm targets (no shortfall, no excess beyond
	// the broker's margin, no release open); SettledSim until, besides,
	// a read of EC2 begun then or later found no ENI detaching or detached
	// (every ENI given up gone), as every read for three simulated seconds
	// after did. ReleaseFloorSim is the broker's wait before proposing
	// (ReleaseAfterSim, which no surplus can start before the first DEL)
	// plus the EC2 buckets' floor for DownMinimum; NotWarm counts nodes
	// not back at warm when the wait ended.
	BackToWarmSim   float64 `json:"back_to_warm_s"`
	SettledSim      float64 `json:"settled_s"`
	ReleaseFloorSim float64 `json:"release_floor_s"`
	ReleaseAfterSim float64 `json:"release_after_s"`
	NotWarm         int     `json:"nodes_not_at_warm"`
	// LastDelSim is when the last DEL returned and CooledSim when its
	// address's cooldown ended, at the latest (pool.DefaultCooldown
	// later): from then on no address is cooling. EarlyProposed counts
	// the releases the broker had proposed by then. DownMinimum assumes
	// every release finds its ENI's addresses all free; a release
	// proposed while one cools takes part of an ENI (an Unassign where the
	// minimum has a Detach and a Delete), which is the harness's DELs
	// running late, not the broker spending calls, so DownCalls are held
	// to DownMinimum only when EarlyProposed is 0. With the default
	// 30 s window the DELs end 30 s in, cooled at 60 s, 60 s before any
	// release can be proposed.
	LastDelSim    float64 `json:"last_del_s"`
	CooledSim     float64 `json:"cooled_s"`
	EarlyProposed int64   `json:"releases_proposed_while_cooling"`
	// InUseFreed counts addresses EC2 stopped putting on a node while a
	// pod there held them (inUseWatch): every address is checked by a
	// read of EC2 begun after the harness chose to delete its pod and
	// before the DEL was sent, besides reads every half second of wall
	// time over the way down and one after the second burst (whose pods
	// all stay); InUsePolls and InUseChecks are how often it looked.
	InUseFreed  int   `json:"in_use_freed"`
	InUsePolls  int   `json:"in_use_polls"`
	InUseChecks int64 `json:"in_use_checks"`
	// Up is the second burst, its floor computed from the state the way
	// down left, as the first burst's is.
	Up UpFigures `json:"up"`
	// Problems are correctness failures of either half.
	Problems []string `json:"problems,omitempty"`
}

// UpFigures are the second burst's figures.
type UpFigures struct {
	Pods          int              `json:"pods"`
	Placed        int              `json:"placed"`
	CompletionSim float64          `json:"completion_s"`
	LowerBoundSim float64          `json:"lower_bound_s"`
	Ratio         float64          `json:"ratio"`
	TTA           Percentiles      `json:"time_to_address_s"`
	Calls         map[string]int64 `json:"calls"`
	Minimum       map[string]int   `json:"minimum"`
	AtMinimum     bool             `json:"calls_at_minimum"`
	Throttled     int64            `json:"request_limit_exceeded"`
}

// upDownEnv is what the way down needs of the variant that ran the first
// burst.
type upDownEnv struct {
	cfg    Config
	admin  *admin
	fleet  *allotFleet
	broker *brokerHandle
	insts  []awssim.AdminInstance
	limits planner.Limits
	// share is the bucket share the floors are computed at.
	share float64
	pods  []podResult
}

// runUpDown runs the way down and the second burst after the first.
func runUpDown(ctx context.Context, env upDownEnv, progress func(string, ...any)) (*UpDownFigures, error) {
	u := env.cfg.UpDown.withDefaults()
	fig := &UpDownFigures{DownWindowSim: u.DownWindow.Seconds()}
	enis, err := env.admin.ENIs(ctx)
	if err != nil {
		return fig, err
	}
	fig.DownMinimum = downMinimum(env.fleet.targets, env.fleet.limits, enis)
	releaseAfter := env.cfg.ReleaseAfter
	if releaseAfter <= 0 {
		releaseAfter = executor.DefaultReleaseAfter
	}
	fig.ReleaseAfterSim = releaseAfter.Seconds()
	fig.ReleaseFloorSim = (releaseAfter + lowerBound(fig.DownMinimum, env.share)).Seconds()
	live := newLiveSet()
	for _, p := range env.pods {
		if p.Placed {
			live.add(p.Addr, env.insts[p.Node].ID)
		}
	}
	watch := newInUseWatch(env.admin, live, 500*time.Millisecond)
	wctx, cancelWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { watch.run(wctx) })
	stopWatch := sync.OnceFunc(func() {
		cancelWatch()
		wg.Wait()
	})
	defer func() {
		stopWatch()
		fig.InUseFreed, fig.InUsePolls, fig.InUseChecks = len(watch.freed), watch.polls, watch.checks
		fig.Problems = append(fig.Problems, watch.problems...)
	}()
	if err := env.admin.ResetCounters(ctx); err != nil {
		return fig, err
	}
	bStart, err := env.broker.stats(ctx)
	if err != nil {
		return fig, err
	}
	progress("way down: deleting %d pods over %s simulated; release floor %.1fs simulated, minimum %v",
		live.len(), u.DownWindow, fig.ReleaseFloorSim, fig.DownMinimum)
	firstDel := time.Now()
	lastDel := deletePods(ctx, env, u, watch, fig)
	fig.LastDelSim = env.cfg.simOf(lastDel.Sub(firstDel)).Seconds()
	cooled := lastDel.Add(env.cfg.wall(pool.DefaultCooldown))
	fig.CooledSim = env.cfg.simOf(cooled.Sub(firstDel)).Seconds()
	type proposed struct {
		n   int64
		err error
	}
	early := make(chan proposed, 1)
	go func() {
		n, err := proposedBy(ctx, env, cooled, bStart)
		early <- proposed{n, err}
	}()
	if err := waitDown(ctx, env, u, watch, firstDel, fig, progress); err != nil {
		return fig, err
	}
	p := <-early
	if p.err != nil {
		return fig, p.err
	}
	fig.EarlyProposed = p.n
	if err := downCalls(ctx, env, bStart, fig); err != nil {
		return fig, err
	}
	progress("way down: last DEL %.1fs, cooled %.1fs, %d releases proposed by then; back at warm %.1fs, settled %.1fs after the first DEL; calls %v (minimum %v)",
		fig.LastDelSim, fig.CooledSim, fig.EarlyProposed, fig.BackToWarmSim, fig.SettledSim, fig.DownCalls, fig.DownMinimum)
	// The second burst runs without the watch's reads of every ENI, as
	// the first does; none of its pods is deleted, so one read after it
	// finds any address of theirs that was freed.
	stopWatch()
	if err := secondBurst(ctx, env, live, fig, progress); err != nil {
		return fig, err
	}
	if err := watch.poll(ctx); err != nil {
		return fig, err
	}
	return fig, nil
}

// deletePods deletes every placed pod of the first burst, spread over
// window, pod k of every node before pod k+1 of any; each pod's address is
// checked and the pod leaves the live set (watch.beforeDel) before its DEL
// is sent. It returns when the last DEL returned, and that time.
func deletePods(ctx context.Context, env upDownEnv, u UpDown, watch *inUseWatch, fig *UpDownFigures) time.Time {
	var placed []podResult
	for _, p := range env.pods {
		if p.Placed {
			placed = append(placed, p)
		}
	}
	nodes := len(env.fleet.nodes)
	order := func(p podResult) int { return p.Pod*nodes + p.Node }
	total := max(len(env.pods), 1)
	last := 0
	for _, p := range placed {
		last = max(last, order(p))
	}
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for _, p := range placed {
		at := time.Duration(float64(u.DownWindow) * float64(order(p)) / float64(total))
		if order(p) == last {
			at += u.lateLast
		}
		wg.Go(func() {
			sleepUntil(ctx, start.Add(env.cfg.wall(at)))
			watch.beforeDel(ctx, p.Addr)
			if err := env.fleet.nodes[p.Node].agent.Del(ctx, podRequest(p.Node, p.Pod, p.Attempts)); err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	end := time.Now()
	fig.PodsDeleted = len(placed) - int(failed.Load())
	if n := failed.Load(); n > 0 {
		fig.Problems = append(fig.Problems, fmt.Sprintf("%d pod DELs failed", n))
	}
	return end
}

// proposedBy reads, at cooled (at once if that has passed), how many
// releases the broker has proposed since bStart (EarlyProposed). Reading
// late can only count a release proposed after cooled as early, never the
// other way.
func proposedBy(ctx context.Context, env upDownEnv, cooled time.Time, bStart BrokerStats) (int64, error) {
	sleepUntil(ctx, cooled)
	st, err := env.broker.stats(ctx)
	if err != nil {
		return 0, err
	}
	return st.Engine.Proposed - bStart.Engine.Proposed, nil
}

// atWarm reports whether a node's pool is back at its warm targets: no
// shortfall, no excess the broker would take back, no release open.
func atWarm(t pool.Targets, l pool.Limits, p *pool.Pool) bool {
	if p == nil {
		return false
	}
	st := p.Stats()
	return pool.Shortfall(t, l, st) == 0 && st.Releasing == 0 &&
		pool.Excess(t, l, st.Assigned, st.Available()) <= releaseMargin
}

// waitDown waits until every pool is back at its warm targets and every
// ENI given up is gone (reads of EC2 begun from then on found no ENI
// detached or detaching for three simulated seconds), or until the settle
// bound after the window.
func waitDown(ctx context.Context, env upDownEnv, u UpDown, watch *inUseWatch, firstDel time.Time, fig *UpDownFigures, progress func(string, ...any)) error {
	deadline := firstDel.Add(env.cfg.wall(u.DownWindow + u.Settle))
	var warmAt time.Time
	lastNote := time.Now()
	for {
		notWarm := 0
		for _, n := range env.fleet.nodes {
			if !atWarm(env.fleet.targets, env.fleet.limits, n.agent.Pool()) {
				notWarm++
			}
		}
		fig.NotWarm = notWarm
		if notWarm == 0 && warmAt.IsZero() {
			warmAt = time.Now()
			fig.BackToWarmSim = env.cfg.simOf(warmAt.Sub(firstDel)).Seconds()
		}
		if notWarm > 0 {
			warmAt = time.Time{}
		}
		if !warmAt.IsZero() {
			watch.readSoon()
			if since, ok := watch.calmSince(warmAt, env.cfg.wall(3*time.Second)); ok {
				fig.SettledSim = env.cfg.simOf(since.Sub(firstDel)).Seconds()
				return nil
			}
		}
		if time.Now().After(deadline) {
			fig.Problems = append(fig.Problems, fmt.Sprintf("%d nodes not back at their warm targets %s (simulated) after the way down", notWarm, u.Settle))
			return nil
		}
		if time.Since(lastNote) > 5*time.Second {
			progress("way down: %.0fs sim after the first DEL, %d nodes not at warm", env.cfg.simOf(time.Since(firstDel)).Seconds(), notWarm)
			lastNote = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// downCalls reads the way down's EC2 calls and the broker's releases.
func downCalls(ctx context.Context, env upDownEnv, bStart BrokerStats, fig *UpDownFigures) error {
	var err error
	if fig.DownCalls, fig.DownThrottled, err = env.admin.Calls(ctx); err != nil {
		return err
	}
	fig.DownExtra = map[string]int64{}
	for _, a := range mutatingActions {
		if d := fig.DownCalls[a] - int64(fig.DownMinimum[a]); d != 0 {
			fig.DownExtra[a] = d
		}
	}
	bEnd, err := env.broker.stats(ctx)
	if err != nil {
		return err
	}
	fig.Proposed = bEnd.Engine.Proposed - bStart.Engine.Proposed
	fig.ReleasedAddrs = bEnd.Engine.Released - bStart.Engine.Released
	return nil
}
