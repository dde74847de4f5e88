package cni

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// AgentSide is allot's agent's own account of a phase, from its /metrics:
// the mean time it took to serve ADD and DEL (from receiving the request to
// answering it; the rest of what the runtime saw is the plugin's exec,
// libcni's work and the socket), and its checkpoint writes.
type AgentSide struct {
	Add, Del time.Duration
	// Writes are checkpoint writes in the phase, Write their mean.
	Writes int
	Write  time.Duration
}

// promTotals are the sum and count of the histograms AgentSide reads, by
// series: "add", "del" (and any other verb) for allot_agent_cni_duration_seconds and
// "checkpoint" for allot_agent_checkpoint_write_seconds (every result).
type promTotals map[string][2]float64

// parseTotals reads promTotals from Prometheus' text format.
func parseTotals(r io.Reader) (promTotals, error) {
	out := promTotals{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var series string
		var idx int
		switch {
		case strings.HasPrefix(line, "allot_agent_cni_duration_seconds_sum{"):
			series, idx = label(line, "verb"), 0
		case strings.HasPrefix(line, "allot_agent_cni_duration_seconds_count{"):
			series, idx = label(line, "verb"), 1
		case strings.HasPrefix(line, "allot_agent_checkpoint_write_seconds_sum"):
			series, idx = "checkpoint", 0
		case strings.HasPrefix(line, "allot_agent_checkpoint_write_seconds_count"):
			series, idx = "checkpoint", 1
		default:
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		t := out[series]
		t[idx] += v
		out[series] = t
	}
	return out, sc.Err()
}

// label returns the value of the label name in a series line.
func label(line, name string) string {
	_, rest, ok := strings.Cut(line, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// mean is the mean of series between two readings.
func mean(before, after promTotals, series string) (time.Duration, int) {
	n := after[series][1] - before[series][1]
	if n <= 0 {
		return 0, 0
	}
	sum := after[series][0] - before[series][0]
	return time.Duration(sum / n * float64(time.Second)), int(n)
}

// agentSide is what happened between two readings.
func agentSide(before, after promTotals) AgentSide {
	var s AgentSide
	s.Add, _ = mean(before, after, "add")
	s.Del, _ = mean(before, after, "del")
	s.Write, s.Writes = mean(before, after, "checkpoint")
	return s
}

func parseTotalsBytes(b []byte) (promTotals, error) { return parseTotals(bytes.NewReader(b)) }
