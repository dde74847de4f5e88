package burst

import (
	"context"
	"fmt"
	"os"
	"time"
)

// Run runs every variant of cfg in turn and returns their figures. A
// variant that fails to run (not one that misses a target) ends the run.
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
	for i, v := range cfg.Variants() {
		dir := fmt.Sprintf("%s/%d", work, i)
		vc := cfg
		vc.TimeScale = cfg.ScaleFor(v.Mode)
		res, err := runVariant(ctx, vc, v, dir)
		_ = os.RemoveAll(dir)
		if err != nil {
			return rep, fmt.Errorf("variant %s: %w", v.Name(), err)
		}
		rep.Results = append(rep.Results, res)
	}
	rep.WallTime = time.Since(rep.Started).Seconds()
	return rep, nil
}
