package burst

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/broker/executor"
)

// TestUpDown runs the way back down and up again at a small size: a burst,
// every pod deleted, the pools back at their warm targets, the burst
// again. No address a live pod held may be freed; every pool must be back
// at its warm targets; the release's calls must stay within the minimum;
// the second burst must place every pod. The broker waits four minutes
// before it proposes a release, not two: the DELs end 30 s in and the last
// address cools by 60 s, and the wider gap (9 s of real time, not 3) is
// room for a loaded machine's late DELs, which would make a release find an
// address still cooling (upDownLateDel).
func TestUpDown(t *testing.T) {
	rep, r, u := upDownTest(t, Config{Nodes: 10, Seed: 11, UpDown: &UpDown{}, ReleaseAfter: upDownReleaseAfter})
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
	if u.PodsDeleted != r.Placed {
		t.Errorf("%d pods deleted, want %d", u.PodsDeleted, r.Placed)
	}
	if u.InUseFreed != 0 || u.InUsePolls == 0 || u.InUseChecks == 0 {
		t.Errorf("%d in-use addresses freed in %d polls (%d checks); want 0 in some", u.InUseFreed, u.InUsePolls, u.InUseChecks)
	}
	if u.NotWarm != 0 || u.BackToWarmSim <= 0 {
		t.Errorf("%d nodes not back at warm; back at warm after %.1fs", u.NotWarm, u.BackToWarmSim)
	}
	// Every ENI given up is gone no earlier than the pools are back at
	// warm: a read of EC2 made then says so.
	if u.SettledSim < u.BackToWarmSim {
		t.Errorf("every ENI given up gone %.1fs after the first DEL, before the pools were back at warm (%.1fs)", u.SettledSim, u.BackToWarmSim)
	}
	if u.ReleaseAfterSim != upDownReleaseAfter.Seconds() {
		t.Errorf("release wait %.0fs, want %s", u.ReleaseAfterSim, upDownReleaseAfter)
	}
	// The minimum holds when every release found its addresses free; one
	// proposed while a DEL's address still cooled is the harness's DELs
	// running late, and the calls then say nothing of the broker.
	if u.EarlyProposed != 0 {
		t.Fatalf("the harness's DELs ran late: %d releases proposed by %.1fs after the first DEL, when the last DEL's address (DEL returned at %.1fs) ended its cooldown; the calls cannot be held to the minimum", u.EarlyProposed, u.CooledSim, u.LastDelSim)
	}
	if len(u.DownMinimum) == 0 {
		t.Errorf("the way down's minimum is empty: 30 pods leave more than the warm targets keep")
	}
	// An ENI given up whole goes by Detach and Delete alone: the way down
	// makes exactly the minimum's calls, no Unassign. Exactly, not at
	// most: the calls are counted up to the moment every pool is back at
	// warm, and a pool is back at warm only once the broker recorded its
	// ENIs' deletes, so a Detach or Delete missing from the count is one
	// the count stopped too early for (a bound from above alone would pass
	// it), not one the broker saved.
	for _, a := range []string{"UnassignPrivateIpAddresses", "DetachNetworkInterface", "DeleteNetworkInterface"} {
		if got, want := u.DownCalls[a], int64(u.DownMinimum[a]); got != want {
			t.Errorf("way down: %d %s calls, minimum %d", got, a, want)
		}
	}
	// Every node gives back three ENIs one at a time; with one wait of
	// ReleaseAfter for them all, not one each, it takes well under three.
	if limit := 3 * upDownReleaseAfter; u.BackToWarmSim >= limit.Seconds() {
		t.Errorf("back at warm %.1fs after the first DEL, want under %s (floor %.1fs)", u.BackToWarmSim, limit, u.ReleaseFloorSim)
	}
	if u.DownThrottled != 0 || u.Up.Throttled != 0 {
		t.Errorf("RequestLimitExceeded: %d on the way down, %d in the second burst", u.DownThrottled, u.Up.Throttled)
	}
	if u.Up.Placed != u.Up.Pods || u.Up.Pods != r.Pods {
		t.Errorf("second burst: %d of %d pods placed, want %d", u.Up.Placed, u.Up.Pods, r.Pods)
	}
	if len(u.Up.Minimum) == 0 {
		t.Errorf("second burst: minimum empty: the way down left nothing to grow")
	}
}

// upDownReleaseAfter is TestUpDown's release wait.
const upDownReleaseAfter = 4 * time.Minute

// TestUpDownLateDel holds one pod's DEL until after the broker's release
// wait: its node's surplus is due while the pod still holds an address, so
// the broker proposes releases before every address is free. The harness
// must say so (the calls cannot be held to the minimum then), the broker
// must still free no address in use, and every pool must end at warm.
func TestUpDownLateDel(t *testing.T) {
	_, r, u := upDownTest(t, Config{Nodes: 3, Seed: 17, UpDown: &UpDown{lateLast: executor.DefaultReleaseAfter + 30*time.Second}})
	if u.LastDelSim < u.ReleaseAfterSim || u.CooledSim < u.LastDelSim+30 {
		t.Errorf("last DEL returned %.1fs after the first, cooled %.1fs; want after the release wait %.0fs", u.LastDelSim, u.CooledSim, u.ReleaseAfterSim)
	}
	if u.EarlyProposed == 0 {
		t.Errorf("no release proposed by %.1fs, when the last DEL's address ended its cooldown; its node's surplus was due at %.0fs", u.CooledSim, u.ReleaseAfterSim)
	}
	if u.InUseFreed != 0 || u.NotWarm != 0 || u.PodsDeleted != r.Placed {
		t.Errorf("%d in-use addresses freed, %d nodes not back at warm, %d of %d pods deleted", u.InUseFreed, u.NotWarm, u.PodsDeleted, r.Placed)
	}
}

// TestUpDownSlowDown deletes the pods over more than ReleaseAfter, so the
// broker gives addresses back while other pods of the same nodes still hold
// theirs: none of theirs may be freed, and every pool must still end at its
// warm targets.
func TestUpDownSlowDown(t *testing.T) {
	_, _, u := upDownTest(t, Config{Nodes: 6, Seed: 13, UpDown: &UpDown{DownWindow: 2 * executor.DefaultReleaseAfter}})
	if u.InUseFreed != 0 || u.NotWarm != 0 {
		t.Errorf("%d in-use addresses freed, %d nodes not back at warm", u.InUseFreed, u.NotWarm)
	}
	// Releases began while pods were still being deleted: the check saw
	// live pods in reads after ReleaseAfter.
	if u.Proposed == 0 || u.InUseChecks == 0 {
		t.Errorf("%d releases proposed, %d in-use checks", u.Proposed, u.InUseChecks)
	}
}

// upDownTest runs cfg's way down and up again with the up-down tests' size
// (30 pods a node, secondary IPs, the whole of every bucket, time scale
// 20), checks the burst's result and the way down's problems, and returns
// the report, its one result and the way-down figures.
func upDownTest(t *testing.T, cfg Config) (Report, Result, *UpDownFigures) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg.PodsPerNode, cfg.TimeScale, cfg.Deadline = 30, 20, 30*time.Minute
	cfg.Modes, cfg.Shares = []daemon.Mode{daemon.ModeSecondaryIP}, []float64{1}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 {
		t.Fatalf("%d results, want 1", len(rep.Results))
	}
	r := rep.Results[0]
	checkCorrect(t, r)
	u := r.UpDown
	if u == nil {
		t.Fatalf("no way-down figures: status %s, %s", r.Status, r.Error)
	}
	t.Logf("way down: %+v", *u)
	for _, p := range u.Problems {
		t.Error(p)
	}
	return rep, r, u
}
