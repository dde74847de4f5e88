package burst

import (
	"context"
	"fmt"
	"os"
	"time"
)

// Variant outcomes, Result.Status.
const (
	// StatusOK is a variant that ran to the end (whether or not it met a
	// target: its figures say that).
	StatusOK = "ok"
	// StatusFailed is a variant that could not be run to the end; Error
	// says why. Its figures are whatever was measured before.
	StatusFailed = "failed"
	// StatusNotRun is a variant the run never started (it was
	// interrupted first).
	StatusNotRun = "not-run"
)

// Run runs every variant of cfg in turn and returns their figures. A
// variant that fails to run is recorded as failed with its error and the
// run goes on with the next; once ctx ends, the variants not yet run are
// recorded as not run. Each result is passed to cfg.OnResult as soon as it
// is known, so a run that dies later loses nothing already measured. The
// error is for a run that could not start at all.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.WithDefaults()
	rep := Report{Machine: machine(), Started: time.Now()}
	if err := cfg.Validate(); err != nil {
		return rep, err
	}
	work := cfg.WorkDir
	if work == "" {
		// Checkpoints go to tmpfs when there is one: 500 nodes' fsyncs on
		// one shared disk would measure this machine's disk, not allot.
		base := ""
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			base = "/dev/shm"
		}
		dir, err := os.MkdirTemp(base, "allot-burst-")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(dir)
		work = dir
	}
	for i, p := range cfg.Points() {
		res := runPoint(ctx, p, fmt.Sprintf("%s/%d", work, i))
		rep.Results = append(rep.Results, res)
		if cfg.OnResult != nil {
			cfg.OnResult(res)
		}
	}
	rep.WallTime = time.Since(rep.Started).Seconds()
	return rep, nil
}

// runPoint runs one variant at one point and returns its result, with its
// status.
func runPoint(ctx context.Context, p Point, dir string) Result {
	if err := ctx.Err(); err != nil {
		res := p.Config.emptyResult(p.Variant)
		res.Status, res.Error = StatusNotRun, err.Error()
		return res
	}
	res, err := runVariant(ctx, p.Config, p.Variant, dir)
	_ = os.RemoveAll(dir)
	if err != nil {
		res.Status, res.Error = StatusFailed, err.Error()
		if p.Config.Progress != nil {
			fmt.Fprintf(p.Config.Progress, "[%s] FAILED: %v\n", p.Variant.Name(), err)
		}
		return res
	}
	res.Status = StatusOK
	return res
}
