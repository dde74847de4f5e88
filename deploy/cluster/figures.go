package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"slices"
	"time"

	"github.com/allotnet/allot/awssim"
)

// Counters reads awssim's per-action EC2 request counters from its admin
// endpoint: what the broker really sent, throttled answers included.
func (c *Cluster) Counters(ctx context.Context) (map[string]awssim.ActionCounters, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Sim.AdminEndpoint()+"/v1/counters", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("awssim counters: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("awssim counters: %s: %s", resp.Status, b)
	}
	out := map[string]awssim.ActionCounters{}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("awssim counters: %w", err)
	}
	return out, nil
}

// EC2Calls are EC2 requests in one phase, by action.
type EC2Calls struct {
	ByAction  map[string]int64 `json:"by_action"`
	Total     int64            `json:"total"`
	Throttled int64            `json:"throttled"`
	Errors    int64            `json:"errors"`
}

// callsBetween is the difference of two counter readings.
func callsBetween(before, after map[string]awssim.ActionCounters) EC2Calls {
	out := EC2Calls{ByAction: map[string]int64{}}
	for action, a := range after {
		b := before[action]
		if n := a.Calls - b.Calls; n > 0 {
			out.ByAction[action] = n
			out.Total += n
		}
		out.Throttled += a.Throttled - b.Throttled
		out.Errors += a.Errors - b.Errors
	}
	return out
}

// Budgets runs `allotctl budgets` against the broker, as an operator
// would, and returns its table and its `-o json` rows.
func (c *Cluster) Budgets(ctx context.Context) (table string, rows json.RawMessage, err error) {
	run := func(args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, c.cfg.Binaries.Ctl, append(append([]string{"--broker", c.Broker.Addr}, c.pki.ctlArgs()...), args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("allotctl %v: %w: %s", args, err, stderr.Bytes())
		}
		return out, nil
	}
	t, err := run("budgets")
	if err != nil {
		return "", nil, err
	}
	j, err := run("budgets", "-o", "json")
	if err != nil {
		return "", nil, err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, j); err != nil {
		return "", nil, fmt.Errorf("allotctl budgets -o json: %w", err)
	}
	return string(t), compact.Bytes(), nil
}

// Percentiles of a set of durations, in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// percentiles uses the nearest-rank method.
func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return Percentiles{P50: ms(rank(0.50)), P99: ms(rank(0.99)), Max: ms(s[len(s)-1])}
}

// PercentilesOf is the p50, p99 and maximum of ds (nearest rank), in
// milliseconds.
func PercentilesOf(ds []time.Duration) Percentiles { return percentiles(ds) }
