package burst

import (
	"context"
	"time"

	"github.com/allotnet/allot/broker/executor"
)

// measureIdle counts the broker's etcd writes over cfg.IdleWindow
// (simulated) with the fleet joined, warm and doing nothing else: the
// steady state's cost of liveness, usage reports and the engine's upkeep.
func measureIdle(ctx context.Context, cfg Config, b *brokerHandle) (*IdleFigures, error) {
	s0, err := b.stats(ctx)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(cfg.wall(cfg.IdleWindow)):
	}
	s1, err := b.stats(ctx)
	if err != nil {
		return nil, err
	}
	sim := cfg.simOf(time.Since(began)).Seconds()
	f := &IdleFigures{Seconds: sim, ByMethod: map[string]float64{}}
	var writes int64
	for m, n := range s1.Writes {
		if d := n - s0.Writes[m]; d > 0 {
			writes += d
			f.ByMethod[m] = float64(d) / sim
		}
	}
	f.WritesPerSec = float64(writes) / sim
	f.RevisionsPerSec = float64(s1.EtcdRevision-s0.EtcdRevision) / sim
	return f, nil
}

// roundFigures sets the burst's planning-round quantiles from the engine's
// counters at its start and end.
func roundFigures(res *Result, start, end executor.Stats) {
	if len(end.RoundHist) == 0 {
		return
	}
	res.Rounds = end.Rounds - start.Rounds
	ms := func(d time.Duration) float64 {
		if d < 0 {
			return -1
		}
		return float64(d) / float64(time.Millisecond)
	}
	hist := histSince(start.RoundHist, end.RoundHist)
	res.RoundP50 = ms(executor.RoundQuantile(hist, 0.5))
	res.RoundP99 = ms(executor.RoundQuantile(hist, 0.99))
	if cpu := histSince(start.RoundCPUHist, end.RoundCPUHist); end.RoundCPU > start.RoundCPU {
		res.RoundCPUP50 = ms(executor.RoundQuantile(cpu, 0.5))
		res.RoundCPUP99 = ms(executor.RoundQuantile(cpu, 0.99))
		res.SlowRoundCPUMs = ms(end.SlowRoundCPU - start.SlowRoundCPU)
	}
	res.SlowRounds = end.SlowRounds - start.SlowRounds
	res.SlowRoundMs = map[string]float64{}
	for ph, d := range end.SlowRoundPhases {
		if d -= start.SlowRoundPhases[ph]; d > 0 {
			res.SlowRoundMs[ph] = ms(d)
		}
	}
}

// histSince is the counts of histogram end less those of start, an
// earlier reading of it.
func histSince(start, end []int64) []int64 {
	hist := make([]int64, len(end))
	for i := range hist {
		hist[i] = end[i]
		if i < len(start) {
			hist[i] -= start[i]
		}
	}
	return hist
}
